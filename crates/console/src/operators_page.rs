//! `/console/operators`: the operators, their roles and statuses (admins only).

use super::operators::{list, Role};
use super::view::{self, render, Ctx, PageResult};
use super::{Console, ConsoleError, Op};
use askama::Template;
use axum::extract::State;
use axum::Extension;

struct Row {
    email: String,
    role: String,
    projects: String,
    status: String,
    created_at: String,
    disabled_at: String,
}

#[derive(Template)]
#[template(path = "console/operators.html")]
struct OperatorsPage {
    ctx: Ctx,
    rows: Vec<Row>,
}

/// `/console/operators`: admins only.
pub(crate) async fn page(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
) -> PageResult {
    if op.role != Role::Admin {
        return Err(ConsoleError::Forbidden("Only admins see the operators."));
    }
    let records = list(&console.app.store).await.map_err(|e| {
        tracing::error!(error = %e, "console: listing operators");
        ConsoleError::Internal
    })?;
    let rows = records
        .into_iter()
        .map(|o| Row {
            projects: if o.projects.is_empty() {
                "all".to_owned()
            } else {
                o.projects.join(", ")
            },
            email: o.email,
            role: o.role,
            status: o.status,
            created_at: view::time(o.created_at),
            disabled_at: view::opt_time(o.disabled_at),
        })
        .collect();
    render(&OperatorsPage {
        ctx: op.ctx(&console, "operators"),
        rows,
    })
}
