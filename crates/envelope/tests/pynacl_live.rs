//! Live round trip against PyNaCl with random nonces, complementing the fixed
//! vectors. Skipped when PyNaCl is not installed, unless
//! `ISSUING_REQUIRE_PYNACL=1` (set in CI) demands it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use issuing_envelope::{open, seal, Key};

const PYTHON: &str = "python3";

const SNIPPET: &str = r#"
import base64, hashlib, json, sys
import nacl.secret, nacl.utils

req = json.load(sys.stdin)
key = hashlib.sha256(req["secret"].encode("utf-8")).digest()
box = nacl.secret.SecretBox(key)

raw = base64.b64decode(req["rust_sealed"], validate=True)
assert raw[0] == 2, "version byte"
opened = box.decrypt(raw[25:], raw[1:25])

nonce = nacl.utils.random(24)
sealed = b"\x02" + nonce + box.encrypt(req["python_plaintext"].encode("utf-8"), nonce).ciphertext
json.dump({"opened": opened.decode("utf-8"), "sealed": base64.b64encode(sealed).decode("ascii")}, sys.stdout)
"#;

fn pynacl_available() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import nacl.secret"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn pynacl_live() {
    if !pynacl_available() {
        let required = std::env::var("ISSUING_REQUIRE_PYNACL").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "ISSUING_REQUIRE_PYNACL=1 but `{PYTHON} -c 'import nacl'` failed; pip install pynacl"
        );
        println!("pynacl_live: skipped ({PYTHON} with PyNaCl not available)");
        return;
    }

    let secret = "live-secret-ключ-🔐";
    let key = Key::from_secret(secret);
    let rust_plaintext = r#"{"request_timestamp":1700000000000000,"note":"from rust ✓"}"#;
    let python_plaintext = r#"{"success":true,"note":"from python ✓"}"#;

    for _ in 0..3 {
        let request = serde_json::json!({
            "secret": secret,
            "rust_sealed": seal(&key, rust_plaintext.as_bytes()),
            "python_plaintext": python_plaintext,
        });

        let mut child = Command::new(PYTHON)
            .args(["-c", SNIPPET])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "python failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );

        let reply: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(reply["opened"], rust_plaintext, "PyNaCl opened Rust's seal");
        let sealed = reply["sealed"].as_str().unwrap();
        assert_eq!(
            open(&key, sealed).unwrap(),
            python_plaintext.as_bytes(),
            "Rust opened PyNaCl's seal"
        );
    }
}
