//! The provider of a production deployment that has no real provider adapter yet: it
//! refuses every call, so production never hands out sandbox cards. Orders fail cleanly
//! (fees refunded) and synchronous calls answer `provider_error`.

use super::{CardSecrets, CreateCard, IssuedCard, Provider, ProviderError};
use futures::future::{self, BoxFuture};
use futures::FutureExt;
use issuing_wire::Amount;

pub struct UnconfiguredProvider;

fn refused<T: Send + 'static>() -> BoxFuture<'static, Result<T, ProviderError>> {
    future::ready(Err(ProviderError::Rejected(
        "no card provider is configured for production mode".into(),
    )))
    .boxed()
}

impl Provider for UnconfiguredProvider {
    fn create_card<'a>(
        &'a self,
        _: CreateCard<'a>,
    ) -> BoxFuture<'a, Result<IssuedCard, ProviderError>> {
        refused()
    }
    fn card_details<'a>(
        &'a self,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<CardSecrets>, ProviderError>> {
        refused()
    }
    fn set_frozen<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        refused()
    }
    fn close_card<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        refused()
    }
    fn topup<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        refused()
    }
    fn withdraw<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        refused()
    }
    fn confirm_3ds<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        refused()
    }
}
