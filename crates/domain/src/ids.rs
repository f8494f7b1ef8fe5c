//! Identifiers are ObjectId-style strings (24 lowercase hex characters), as the spec's
//! migration notes describe card ids, laid out as MongoDB's ObjectId: 4 bytes of seconds
//! since the epoch, 5 bytes drawn at random once per process, and a 3-byte counter that
//! starts at a random value.
//!
//! Why a counter and not 8 fresh random bytes each: ids are primary keys of the append
//! tables (transactions, transfers, events, deliveries). With random low bytes, a
//! second's inserts land all over that second's key range, and every insert of a batch
//! dirties a different index page (each one written to the log at commit); with the
//! counter, one process's ids rise, so a batch's rows share the last page. Ids are not
//! secrets: every lookup is scoped by project, and tokens that must be unguessable
//! (API secrets, console sessions) are drawn on their own. Uniqueness: within a process
//! (second, counter) never repeats unless 2^24 ids are made in one second; across
//! processes sharing a database the 5 random bytes differ (1 in 2^40 to collide, and then
//! second and counter must meet too).

use rand::RngCore;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub const ID_LEN: usize = 24;

/// The low 24 bits are the counter.
const COUNTER_MASK: u32 = 0x00ff_ffff;

struct Process {
    random: [u8; 5],
    counter: AtomicU32,
}

fn process() -> &'static Process {
    static PROCESS: OnceLock<Process> = OnceLock::new();
    PROCESS.get_or_init(|| {
        let mut bytes = [0u8; 9];
        rand::thread_rng().fill_bytes(&mut bytes);
        let mut random = [0u8; 5];
        random.copy_from_slice(&bytes[..5]);
        let start = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        Process {
            random,
            counter: AtomicU32::new(start),
        }
    })
}

pub fn new_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let secs = u32::try_from(chrono::Utc::now().timestamp()).unwrap_or(u32::MAX);
    let process = process();
    let count = process.counter.fetch_add(1, Ordering::Relaxed) & COUNTER_MASK;
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    bytes[4..9].copy_from_slice(&process.random);
    bytes[9..].copy_from_slice(&count.to_be_bytes()[1..]);
    let mut id = String::with_capacity(ID_LEN);
    for b in bytes {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    id
}

/// True for strings that could be one of our ids; lets lookups skip the database for junk.
pub fn looks_like_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(looks_like_id(&a), "{a}");
        assert!(!looks_like_id("xyz"));
    }

    #[test]
    fn one_process_ids_rise_within_a_second() {
        let ids: Vec<String> = (0..1_000).map(|_| new_id()).collect();
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        // Same process bytes; the counter part rises (mod 2^24) from id to id, by one
        // unless another test in this process made ids in between.
        for pair in ids.windows(2) {
            assert_eq!(pair[0][8..18], pair[1][8..18], "{pair:?}");
            let a = u32::from_str_radix(&pair[0][18..], 16).unwrap();
            let b = u32::from_str_radix(&pair[1][18..], 16).unwrap();
            let step = b.wrapping_sub(a) & COUNTER_MASK;
            assert!((1..100_000).contains(&step), "{pair:?}");
        }
    }
}
