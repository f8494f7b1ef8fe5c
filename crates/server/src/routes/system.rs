use crate::pipeline::{reply, ApiResult};
use issuing_domain::time::now_micros;
use serde::Serialize;

#[derive(Serialize)]
pub(crate) struct Health {
    status: &'static str,
}

pub(crate) async fn health() -> ApiResult<Health> {
    Ok(reply(Health { status: "ok" }))
}

#[derive(Serialize)]
pub(crate) struct Time {
    timestamp: i64,
}

pub(crate) async fn time() -> ApiResult<Time> {
    Ok(reply(Time {
        timestamp: now_micros(),
    }))
}
