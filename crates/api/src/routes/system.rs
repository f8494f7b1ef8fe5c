use crate::pipeline::{reply, ApiResult};
use issuing_domain::time::now_micros;
use issuing_wire::api::{Health, ServerTime};

pub(crate) async fn health() -> ApiResult<Health> {
    Ok(reply(Health {
        status: "ok".into(),
    }))
}

pub(crate) async fn time() -> ApiResult<ServerTime> {
    Ok(reply(ServerTime {
        timestamp: now_micros(),
    }))
}
