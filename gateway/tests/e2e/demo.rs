use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use base64::Engine;
use serde_json::json;

use crate::support::*;

/// `toolgate demo` as a child process; killed on drop.
struct Demo {
    child: Child,
    mcp: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `toolgate demo` on ephemeral ports and reads the MCP URL it prints.
fn start_demo() -> Demo {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--upstream-listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("toolgate demo starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.trim().strip_prefix("MCP URL:") {
                if !sent {
                    let _ = tx.send(url.trim().to_string());
                    sent = true;
                }
            }
        }
    });
    let mcp = rx
        .recv_timeout(WAIT)
        .expect("timed out waiting for toolgate demo to print its MCP URL");
    Demo { child, mcp }
}

#[tokio::test]
async fn demo_serves_the_pet_store_to_a_real_client() {
    let demo = start_demo();
    assert!(demo.mcp.starts_with("http://127.0.0.1:") && demo.mcp.ends_with("/mcp"));
    let client = connect(&demo.mcp).await;

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "pets__create_pet",
            "pets__fetch_pet",
            "pets__find_pets",
            "pets__get_pet_photo"
        ],
        "the overlay hides deletePet and renames listPets"
    );

    let r = call(&client, "pets__fetch_pet", json!({"petId": 1})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let pet = r
        .structured_content
        .expect("fetch_pet has structured content");
    assert_eq!(pet["id"], json!(1));
    assert_eq!(pet["name"], json!("Rex"));

    let r = call(&client, "pets__fetch_pet", json!({"petId": 999})).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("Pet not found"), "{}", text(&r));

    let r = call(&client, "pets__get_pet_photo", json!({"petId": 1})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image().cloned())
        .expect("the photo is ImageContent");
    assert_eq!(image.mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));

    let r = call(
        &client,
        "pets__create_pet",
        json!({"name": "Nemo", "kind": "cat"}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let created = r
        .structured_content
        .expect("create_pet has structured content");
    assert_eq!(created["name"], json!("Nemo"));
    let r = call(&client, "pets__find_pets", json!({"kind": "cat"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("Nemo"), "{}", text(&r));
}
