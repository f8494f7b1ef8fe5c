use crate::{MasterKey, ServerConfig};
use issuing_store::Store;
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Store,
    pub master: MasterKey,
    pub config: Arc<ServerConfig>,
}
