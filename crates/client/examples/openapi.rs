//! Prints the OpenAPI 3.1 document of the plaintext API (pretty JSON, sorted keys, a
//! trailing newline):
//!
//! ```sh
//! cargo run -p issuing-client --features openapi --example openapi > docs/openapi.json
//! ```

fn main() {
    let document = issuing_client::openapi::document();
    match serde_json::to_string_pretty(&document) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("openapi: {e}");
            std::process::exit(1);
        }
    }
}
