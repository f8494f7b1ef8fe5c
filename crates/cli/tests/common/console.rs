//! A client for the operator console as a browser would speak to it, without a
//! browser: one session cookie, same-origin form posts, redirects not followed.

use reqwest::header::HeaderMap;
use std::net::SocketAddr;

pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The CSRF token of the page's forms.
    pub fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .unwrap_or_else(|| panic!("no CSRF token on the page: {}", self.body));
        let rest = &self.body[at + "name=\"csrf\" value=\"".len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }
}

pub struct Console {
    pub base: String,
    http: reqwest::Client,
    pub cookie: Option<String>,
}

impl Console {
    pub fn new(addr: SocketAddr) -> Console {
        Console {
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookie: None,
        }
    }

    /// Signs in; panics unless the console accepts.
    pub async fn login(addr: SocketAddr, email: &str, password: &str) -> Console {
        let mut c = Console::new(addr);
        let p = c.try_login(email, password).await;
        assert_eq!((p.status, p.location()), (303, "/console/"), "{}", p.body);
        c
    }

    /// Posts the login form; keeps the session cookie it sets.
    pub async fn try_login(&mut self, email: &str, password: &str) -> Page {
        self.try_login_from(email, password, None).await
    }

    /// Posts the login form as a client at `address` (through a trusted proxy, which
    /// names it in `X-Forwarded-For`); keeps the session cookie it sets.
    pub async fn try_login_from(
        &mut self,
        email: &str,
        password: &str,
        address: Option<&str>,
    ) -> Page {
        let mut headers = vec![
            ("origin", self.base.as_str()),
            ("sec-fetch-site", "same-origin"),
        ];
        if let Some(a) = address {
            headers.push(("x-forwarded-for", a));
        }
        let p = self
            .post_with(
                "/console/login",
                &[("email", email), ("password", password)],
                &headers,
            )
            .await;
        if let Some(set) = p.headers.get("set-cookie").and_then(|v| v.to_str().ok()) {
            let pair = set.split(';').next().unwrap().to_owned();
            self.cookie = Some(pair);
        }
        p
    }

    /// The session cookie's value.
    pub fn token(&self) -> String {
        self.cookie
            .as_deref()
            .and_then(|c| c.split_once('='))
            .map(|(_, v)| v.to_owned())
            .unwrap()
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Page {
        let req = match &self.cookie {
            Some(c) => req.header("cookie", c),
            None => req,
        };
        let res = req.send().await.unwrap();
        Page {
            status: res.status().as_u16(),
            headers: res.headers().clone(),
            body: res.text().await.unwrap(),
        }
    }

    /// A GET with extra headers (an htmx poll sends `HX-Request`).
    pub async fn send_with(&self, path: &str, headers: &[(&str, &str)]) -> Page {
        let mut req = self.http.get(format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    pub async fn get(&self, path: &str) -> Page {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// A form post as the console's own page would send it (same origin).
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        self.post_with(
            path,
            form,
            &[("origin", &self.base), ("sec-fetch-site", "same-origin")],
        )
        .await
    }

    pub async fn post_with(
        &self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let mut req = self.http.post(format!("{}{path}", self.base)).form(form);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    /// Posts an action form with the CSRF token of `page_path`.
    pub async fn act(&self, page_path: &str, action: &str, form: &[(&str, &str)]) -> Page {
        let csrf = self.get(page_path).await.csrf();
        let mut fields = vec![("csrf", csrf.as_str())];
        fields.extend_from_slice(form);
        self.post(action, &fields).await
    }
}
