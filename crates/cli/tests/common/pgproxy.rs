//! A TCP proxy on 127.0.0.1:0 in front of the test PostgreSQL server, which a test can
//! cut (every open connection is closed and new ones are closed at once: the server
//! is gone, as after a crash) and restore. With `read_only`, every session it carries
//! starts with `default_transaction_read_only = on` (it answers the client's TLS
//! request with "no" and adds the setting to the startup message's `options`): to
//! the client that host is a server that does not accept writes, as a standby.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct PgProxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped by every cut: the connections of an older generation close.
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

const SSL_REQUEST: u32 = 80_877_103;
const GSS_REQUEST: u32 = 80_877_104;

impl PgProxy {
    pub async fn start(upstream: SocketAddr, read_only: bool) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accepted = Arc::new(AtomicU64::new(0));
        let task = {
            let (cut, generation, accepted) = (cut.clone(), generation.clone(), accepted.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    if cut.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let mut gen = generation.subscribe();
                    tokio::spawn(async move {
                        let carried = carry(client, upstream, read_only);
                        tokio::select! {
                            _ = carried => {}
                            _ = gen.changed() => {}
                        }
                    });
                }
            })
        };
        PgProxy {
            port,
            cut,
            generation,
            accepted,
            task,
        }
    }

    /// Closes every connection and refuses new ones (they are closed at once).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Connections carried since the start.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn carry(mut client: TcpStream, upstream: SocketAddr, read_only: bool) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    if read_only && startup_read_only(&mut client, &mut server).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

/// Reads the client's first messages: a TLS or GSS request is answered "no" here, and
/// the startup message goes on with `options=-c default_transaction_read_only=on`.
async fn startup_read_only(client: &mut TcpStream, server: &mut TcpStream) -> std::io::Result<()> {
    loop {
        let len = client.read_u32().await? as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        client.read_exact(&mut body).await?;
        let code = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        if code == SSL_REQUEST || code == GSS_REQUEST {
            client.write_all(b"N").await?;
            continue;
        }
        // protocol version, then key\0value\0 pairs, then a final \0.
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut fields = body[4..]
            .split(|b| *b == 0)
            .map(|f| String::from_utf8_lossy(f).into_owned());
        while let Some(k) = fields.next() {
            if k.is_empty() {
                break;
            }
            let v = fields.next().unwrap_or_default();
            pairs.push((k, v));
        }
        let setting = "-c default_transaction_read_only=on";
        match pairs.iter_mut().find(|(k, _)| k == "options") {
            Some((_, v)) => *v = format!("{v} {setting}"),
            None => pairs.push(("options".into(), setting.into())),
        }
        let mut out = body[0..4].to_vec();
        for (k, v) in &pairs {
            out.extend_from_slice(k.as_bytes());
            out.push(0);
            out.extend_from_slice(v.as_bytes());
            out.push(0);
        }
        out.push(0);
        server.write_u32(out.len() as u32 + 4).await?;
        server.write_all(&out).await?;
        return Ok(());
    }
}
