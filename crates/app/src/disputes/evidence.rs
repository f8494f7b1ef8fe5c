//! A dispute's evidence files (CONTRACT §15): PDF, PNG or JPEG, at most 4 MiB each and
//! 10 per dispute, only while the dispute is open. The content is sealed with the
//! master key before it reaches the database and opened only to answer
//! `disputes/evidence/get`; it is never logged (`Debug` shows sizes). A dispute filed
//! with Lithic gets each file there as well (`provider::lithic::disputes`).

use crate::App;
use base64::Engine as _;
use issuing_domain::dispute::DisputeStatus;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::disputes::{self, EvidenceRecord};
use issuing_store::StoreError;
use issuing_wire::api::{DisputesEvidenceAdd, Evidence, EvidenceFile};
use issuing_wire::{ApiError, ErrorSlug};
use sha2::{Digest, Sha256};

/// CONTRACT §15: decoded size of one file.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// CONTRACT §15: files per dispute.
pub const MAX_FILES: usize = 10;
/// The request body this one endpoint accepts (the base64 of 4 MiB in the envelope's
/// base64); every other endpoint keeps the server's limit.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
const MAX_FILENAME_CHARS: usize = 255;

/// The three types, each with the bytes its files start with.
const TYPES: &[(&str, &[u8])] = &[
    ("application/pdf", b"%PDF-"),
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
];

/// A file that passed every check: its name, type and bytes.
struct Checked {
    filename: String,
    content_type: &'static str,
    bytes: Vec<u8>,
}

fn check(req: &DisputesEvidenceAdd) -> Result<Checked, ApiError> {
    let filename = req.filename.trim();
    if filename.is_empty()
        || filename.chars().count() > MAX_FILENAME_CHARS
        || filename
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\')
    {
        return Err(ApiError::validation(format!(
            "filename must be 1 to {MAX_FILENAME_CHARS} characters without control characters, / or \\"
        )));
    }
    let (content_type, magic) = TYPES
        .iter()
        .find(|(t, _)| *t == req.content_type.trim())
        .copied()
        .ok_or_else(|| {
            ApiError::validation("content_type must be application/pdf, image/png or image/jpeg")
        })?;
    // 4 MiB encode to at most this many base64 characters: a longer text cannot fit,
    // and is refused before it is decoded.
    if req.content.len() > MAX_FILE_BYTES.div_ceil(3) * 4 {
        return Err(too_large());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(req.content.trim())
        .map_err(|_| ApiError::validation("content must be base64 (standard alphabet, padded)"))?;
    if bytes.is_empty() {
        return Err(ApiError::validation("content is empty"));
    }
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    if !bytes.starts_with(magic) {
        return Err(ApiError::validation(format!(
            "content is not a {content_type} file"
        )));
    }
    Ok(Checked {
        filename: filename.to_owned(),
        content_type,
        bytes,
    })
}

fn too_large() -> ApiError {
    ApiError::validation("An evidence file may be at most 4 MiB")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `disputes/evidence/add`.
pub async fn add(
    state: &App,
    project_id: &str,
    req: &DisputesEvidenceAdd,
) -> Result<Evidence, ApiError> {
    let mut tx = state.store.begin().await?;
    // Locked: two files racing cannot both be the tenth.
    let d = super::load(&mut tx, &state.store, project_id, &req.dispute_id, true).await?;
    let file = check(req)?;
    if DisputeStatus::parse(&d.status).is_none_or(DisputeStatus::is_final) {
        return Err(ApiError::new(
            ErrorSlug::InvalidStatusTransition,
            format!("Evidence cannot be added to a {} dispute", d.status),
        ));
    }
    let existing = disputes::evidence_list(&mut tx, project_id, &d.id).await?;
    if existing.len() >= MAX_FILES {
        return Err(ApiError::validation(format!(
            "A dispute holds at most {MAX_FILES} evidence files"
        )));
    }
    let rec = EvidenceRecord {
        id: new_id(),
        dispute_id: d.id.clone(),
        project_id: project_id.to_owned(),
        filename: file.filename.clone(),
        content_type: file.content_type.into(),
        size: i64::try_from(file.bytes.len()).map_err(|_| too_large())?,
        sha256: hex(&Sha256::digest(&file.bytes)),
        sealed: state.master.seal(&file.bytes),
        created_at: now_micros(),
    };
    disputes::insert_evidence(&mut tx, &rec).await?;
    let card = issuing_store::cards::get(&mut tx, project_id, &d.card_id).await?;
    tx.commit().await.map_err(StoreError::from)?;
    // A dispute filed with Lithic gets the file there too, once ours is stored (no
    // lock is held across Lithic's calls); a file Lithic would not take is not kept.
    let lithic = card.and_then(|c| state.providers.lithic(&c.subprovider_code).cloned());
    if let (Some(lithic), Some(token)) = (lithic, d.provider_dispute_id.as_deref()) {
        let sent = lithic
            .upload_evidence(
                &d.card_id,
                token,
                &rec.filename,
                &rec.content_type,
                &file.bytes,
            )
            .await;
        if let Err(e) = sent {
            let mut conn = state.store.conn().await?;
            disputes::delete_evidence(&mut conn, project_id, &rec.id).await?;
            return Err(e);
        }
    }
    Ok(super::view::evidence(&rec))
}

/// `disputes/evidence/get`.
pub async fn get(
    state: &App,
    project_id: &str,
    dispute_id: &str,
    evidence_id: &str,
) -> Result<EvidenceFile, ApiError> {
    let mut conn = state.store.conn().await?;
    let d = super::load(&mut conn, &state.store, project_id, dispute_id, false).await?;
    let not_found = || ApiError::new(ErrorSlug::EvidenceNotFound, "Evidence not found");
    let id = evidence_id.trim();
    if id.is_empty() {
        return Err(ApiError::validation("evidence_id is required"));
    }
    let e = disputes::evidence_get(&mut conn, project_id, &d.id, id)
        .await?
        .ok_or_else(not_found)?;
    let bytes = state.master.open(&e.sealed).ok_or_else(|| {
        tracing::error!(evidence_id = %e.id, "evidence does not open with the master key");
        ApiError::internal()
    })?;
    Ok(EvidenceFile {
        evidence_id: e.id.clone(),
        dispute_id: e.dispute_id.clone(),
        filename: e.filename.clone(),
        content_type: e.content_type.clone(),
        size: u64::try_from(e.size).unwrap_or(0),
        sha256: e.sha256.clone(),
        created_at: to_rfc3339(e.created_at),
        content: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(content_type: &str, bytes: &[u8], filename: &str) -> DisputesEvidenceAdd {
        DisputesEvidenceAdd {
            dispute_id: "d".into(),
            filename: filename.into(),
            content_type: content_type.into(),
            content: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    #[test]
    fn files_must_be_what_they_say() {
        assert!(check(&req("application/pdf", b"%PDF-1.7 x", "a.pdf")).is_ok());
        assert!(check(&req("image/png", b"\x89PNG\r\n\x1a\n....", "a.png")).is_ok());
        assert!(check(&req("image/jpeg", b"\xff\xd8\xff\xe0", "a.jpg")).is_ok());
        assert!(check(&req("image/png", b"%PDF-1.7", "a.png")).is_err());
        assert!(check(&req("text/plain", b"hello", "a.txt")).is_err());
        assert!(check(&req("application/pdf", b"%PDF-", "../a.pdf")).is_err());
        assert!(check(&req("application/pdf", b"%PDF-", "a\u{0}.pdf")).is_err());
        assert!(check(&req("application/pdf", b"", "a.pdf")).is_err());
        let mut big = b"%PDF-".to_vec();
        big.resize(MAX_FILE_BYTES, b'x');
        assert!(check(&req("application/pdf", &big, "a.pdf")).is_ok());
        big.push(b'x');
        assert!(check(&req("application/pdf", &big, "a.pdf")).is_err());
        let mut bad = req("application/pdf", b"%PDF-", "a.pdf");
        bad.content = "not base64!".into();
        assert!(check(&bad).is_err());
    }
}
