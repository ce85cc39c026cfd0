//! A parsed request carried out on a tenant's store, and its answer composed (memcached
//! doc/protocol.txt: the text commands, and the meta commands with their flags).

use heterarchy_kvstore::{
    Arithmetic, Counted, Delete, Deleted, Expiry, Lookup, Mode, Storage, Stored, Write,
};
use heterarchy_memcache::{compose, Direction, Meta, MetaCommand, MetaFlags, Request, StoreMode};

use super::counters::add;
use super::stats::write_stats;
use super::tenant::Tenant;

/// What the connection does after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    Close,
    /// A multi-get filled the output after answering this many of its keys: send what is
    /// queued, then execute the same request again from that key, so a get of thousands of
    /// large values never buffers them all.
    Paused {
        keys_done: usize,
    },
}

/// The version a `version` command reports: the memcached release whose protocol is spoken,
/// then ours (libmemcached parses the leading numbers).
pub const VERSION: &str = concat!("1.6.18-heterarchy-", env!("CARGO_PKG_VERSION"));

const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
const TOO_LARGE: &str = "SERVER_ERROR object too large for cache";
/// A return flag without a token.
const NO_TOKEN: &[u8] = b"";
const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";
/// A get of this key panics in the unit tests, to test the connection's guard.
#[cfg(test)]
pub const PANIC_KEY: &[u8] = b"__panic_in_a_test__";

/// Executes `request` for `tenant` on its locked `store` at `now_secs`, appending the answer to
/// `out`; a multi-get starts at key `keys_done` and pauses once `out` holds `output_limit`
/// bytes.
pub fn execute(
    request: &Request,
    tenant: &Tenant,
    store: &mut dyn Storage,
    now_secs: u32,
    keys_done: usize,
    output_limit: usize,
    out: &mut Vec<u8>,
) -> Outcome {
    #[cfg(test)]
    if let Request::Get { keys, .. } = request {
        assert!(
            keys.iter().next() != Some(PANIC_KEY),
            "a test asked for a panic"
        );
    }
    let counters = &tenant.counters;
    // A request that fails part way (its storage failing under a value) answers with its error
    // alone, not after part of an answer.
    let answer_start = out.len();
    let result = match request {
        Request::Get {
            keys,
            with_cas,
            touch_exptime,
        } => {
            let lookup = Lookup {
                touch: touch_exptime.map(|exptime| Expiry::from_exptime(exptime, now_secs)),
                ..Lookup::default()
            };
            let answered = get_many(
                store,
                keys.iter().skip(keys_done),
                *with_cas,
                &lookup,
                now_secs,
                output_limit,
                out,
            );
            let count = answered.as_ref().map_or(0, |&answered| answered as u64);
            add(&counters.cmd_get, count);
            if lookup.touch.is_some() {
                add(&counters.cmd_touch, count);
            }
            match answered {
                Ok(answered) if keys_done + answered < keys.len() => {
                    return Outcome::Paused {
                        keys_done: keys_done + answered,
                    }
                }
                result => result.map(drop),
            }
        }
        Request::Store {
            mode,
            key,
            client_flags,
            exptime,
            cas_unique,
            noreply,
            data,
        } => {
            add(&counters.cmd_set, 1);
            let write = Write {
                key,
                value: data,
                client_flags: *client_flags,
                expiry: Expiry::from_exptime(*exptime, now_secs),
                mode: store_mode(*mode),
                compare_cas: (*mode == StoreMode::Cas).then_some(*cas_unique),
                invalidate: false,
                new_cas: None,
            };
            store.store(now_secs, &write).map(|stored| {
                let line = match stored {
                    Stored::Stored(_) => "STORED",
                    Stored::NotStored => "NOT_STORED",
                    Stored::Exists => "EXISTS",
                    Stored::NotFound => "NOT_FOUND",
                    Stored::TooLarge => TOO_LARGE,
                };
                reply(out, *noreply && stored != Stored::TooLarge, line);
            })
        }
        Request::Delete { key, noreply } => {
            let deleted = store.delete(now_secs, key, &Delete::default());
            deleted.map(|deleted| {
                let line = match deleted {
                    Deleted::Deleted => "DELETED",
                    Deleted::NotFound => "NOT_FOUND",
                    Deleted::Exists => "EXISTS",
                };
                reply(out, *noreply, line);
            })
        }
        Request::Arithmetic {
            key,
            direction,
            delta,
            noreply,
        } => {
            let request = Arithmetic {
                incr: *direction == Direction::Incr,
                delta: *delta,
                compare_cas: None,
                vivify: None,
                touch: None,
                new_cas: None,
            };
            store
                .arithmetic(now_secs, key, &request)
                .map(|counted| match counted {
                    Counted::Value { value, .. } => reply(out, *noreply, &value.to_string()),
                    Counted::NotFound => reply(out, *noreply, "NOT_FOUND"),
                    Counted::NonNumeric => reply(out, false, NON_NUMERIC),
                    Counted::Exists => reply(out, *noreply, "EXISTS"),
                })
        }
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            add(&counters.cmd_touch, 1);
            let expiry = Expiry::from_exptime(*exptime, now_secs);
            store.touch(now_secs, key, expiry).map(|touched| {
                reply(out, *noreply, if touched { "TOUCHED" } else { "NOT_FOUND" });
            })
        }
        Request::FlushAll {
            delay_seconds,
            noreply,
        } => {
            add(&counters.cmd_flush, 1);
            let delay = (*delay_seconds).clamp(0, i64::from(u32::MAX)) as u32;
            store
                .flush_all(now_secs, delay)
                .map(|()| reply(out, *noreply, "OK"))
        }
        Request::Stats { group, .. } => {
            write_stats(tenant, store, *group, out);
            Ok(())
        }
        Request::Version => {
            reply(out, false, &format!("VERSION {VERSION}"));
            Ok(())
        }
        Request::Verbosity { noreply, .. } => {
            reply(out, *noreply, "OK");
            Ok(())
        }
        Request::Quit => return Outcome::Close,
        Request::Meta(meta) => {
            add(&counters.cmd_meta, 1);
            execute_meta(meta, tenant, store, now_secs, out)
        }
    };
    if let Err(error) = result {
        out.truncate(answer_start);
        reply(out, false, &format!("SERVER_ERROR {error}"));
    }
    Outcome::Continue
}

/// The store's write mode for a protocol's (a cas is a set with a CAS comparison).
fn store_mode(mode: StoreMode) -> Mode {
    match mode {
        StoreMode::Set | StoreMode::Cas => Mode::Set,
        StoreMode::Add => Mode::Add,
        StoreMode::Replace => Mode::Replace,
        StoreMode::Append => Mode::Append,
        StoreMode::Prepend => Mode::Prepend,
    }
}

fn reply(out: &mut Vec<u8>, quiet: bool, line: &str) {
    if !quiet {
        compose::line(out, line);
    }
}

/// Answers `keys` until `out` holds `output_limit` bytes, and ends the answer with "END" if
/// all were answered; returns how many were.
fn get_many<'a>(
    store: &mut dyn Storage,
    keys: impl Iterator<Item = &'a [u8]>,
    with_cas: bool,
    lookup: &Lookup,
    now_secs: u32,
    output_limit: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut answered = 0;
    for key in keys {
        // At least one key a call, so that a paused get always gets on.
        if answered > 0 && out.len() >= output_limit {
            return Ok(answered);
        }
        answered += 1;
        let Some(found) = store.get(now_secs, key, lookup)? else {
            continue;
        };
        compose::value_line(
            out,
            key,
            found.client_flags,
            found.value_len as usize,
            with_cas.then_some(found.cas),
        );
        store.read_value(&found, out)?;
        out.extend_from_slice(b"\r\n");
    }
    compose::end(out);
    Ok(answered)
}

/// A meta flag's token as an expiry (`T`, `N`): memcached's exptime rules.
fn expiry_flag(flags: &MetaFlags, letter: u8, now_secs: u32) -> Result<Option<Expiry>, ()> {
    flags
        .number::<i64>(letter)
        .map(|ttl| ttl.map(|ttl| Expiry::from_exptime(ttl, now_secs)))
        .map_err(|_| ())
}

/// A meta flag's token as a CAS unique (`C` to compare, `E` to give).
fn cas_flag(flags: &MetaFlags, letter: u8) -> Result<Option<u64>, ()> {
    flags.number::<u64>(letter).map_err(|_| ())
}

fn execute_meta(
    meta: &Meta,
    tenant: &Tenant,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let answer = match meta.command {
        MetaCommand::Noop => {
            compose::line(out, "MN");
            return Ok(());
        }
        MetaCommand::Get => meta_get(meta, tenant, store, now_secs, out),
        MetaCommand::Set => meta_set(meta, tenant, store, now_secs, out),
        MetaCommand::Delete => meta_delete(meta, store, now_secs, out),
        MetaCommand::Arithmetic => meta_arithmetic(meta, store, now_secs, out),
        MetaCommand::Debug => meta_debug(meta, store, now_secs, out),
    };
    match answer {
        Ok(result) => result,
        Err(()) => {
            compose::line(out, BAD_TOKEN);
            Ok(())
        }
    }
}

type MetaResult = Result<std::io::Result<()>, ()>;

/// The `k` return flag: the key as sent, then `b` when it was sent in base64.
fn echo_key(meta: &Meta, out: &mut Vec<u8>) {
    compose::meta_flag(out, b'k', meta.wire_key);
    if meta.flags.has(b'b') {
        compose::meta_flag(out, b'b', NO_TOKEN);
    }
}

/// What an item can tell the meta return flags; `None` where the command has nothing to say.
#[derive(Clone, Copy, Default)]
struct Returned {
    cas: Option<u64>,
    client_flags: Option<u32>,
    hit_before: Option<bool>,
    idle_secs: Option<u32>,
    size: Option<u32>,
    /// Seconds left, -1 for never.
    ttl: Option<i64>,
}

/// The return flags asked for, in the order asked: the opaque and the key always, the item's
/// fields where `returned` has them.
fn echo_flags(meta: &Meta, returned: Returned, out: &mut Vec<u8>) {
    for (letter, token) in meta.flags.iter() {
        let number = match letter {
            b'c' => returned.cas,
            b'f' => returned.client_flags.map(u64::from),
            b'h' => returned.hit_before.map(u64::from),
            b'l' => returned.idle_secs.map(u64::from),
            b's' => returned.size.map(u64::from),
            b't' => {
                if let Some(ttl) = returned.ttl {
                    compose::meta_flag(out, b't', ttl);
                }
                None
            }
            b'O' => {
                compose::meta_flag(out, b'O', token.unwrap_or(NO_TOKEN));
                None
            }
            b'k' => {
                echo_key(meta, out);
                None
            }
            _ => None,
        };
        if let Some(number) = number {
            compose::meta_flag(out, letter, number);
        }
    }
}

/// Seconds left before `expiry` as the `t` flag shows them: -1 for never.
fn ttl_flag(expiry: Expiry, now_secs: u32) -> i64 {
    expiry.remaining_secs(now_secs).map_or(-1, i64::from)
}

fn meta_get(
    meta: &Meta,
    tenant: &Tenant,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> MetaResult {
    let flags = &meta.flags;
    add(&tenant.counters.cmd_get, 1);
    let lookup = Lookup {
        touch: expiry_flag(flags, b'T', now_secs)?,
        no_bump: flags.has(b'u'),
        vivify: expiry_flag(flags, b'N', now_secs)?,
        recache_below_secs: flags.number::<u32>(b'R').map_err(|_| ())?,
        new_cas: cas_flag(flags, b'E')?,
    };
    let found = match store.get(now_secs, &meta.key, &lookup) {
        Ok(found) => found,
        Err(error) => return Ok(Err(error)),
    };
    let Some(found) = found else {
        if !flags.quiet() {
            compose::meta_header(out, b"EN", None);
            echo_flags(meta, Returned::default(), out);
            out.extend_from_slice(b"\r\n");
        }
        return Ok(Ok(()));
    };
    let with_value = flags.has(b'v');
    let code = if with_value { b"VA" } else { b"HD" };
    compose::meta_header(out, code, with_value.then_some(found.value_len as usize));
    let returned = Returned {
        cas: Some(found.cas),
        client_flags: Some(found.client_flags),
        hit_before: Some(found.hit_before),
        idle_secs: Some(found.idle_secs),
        size: Some(found.value_len),
        ttl: Some(ttl_flag(found.expiry, now_secs)),
    };
    echo_flags(meta, returned, out);
    if found.win {
        compose::meta_flag(out, b'W', NO_TOKEN);
    }
    if found.stale {
        compose::meta_flag(out, b'X', NO_TOKEN);
    }
    if found.already_won {
        compose::meta_flag(out, b'Z', NO_TOKEN);
    }
    out.extend_from_slice(b"\r\n");
    if with_value {
        if let Err(error) = store.read_value(&found, out) {
            return Ok(Err(error));
        }
        out.extend_from_slice(b"\r\n");
    }
    Ok(Ok(()))
}

fn meta_set(
    meta: &Meta,
    tenant: &Tenant,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> MetaResult {
    let flags = &meta.flags;
    add(&tenant.counters.cmd_set, 1);
    let mode = match flags.store_mode() {
        Ok(mode) => store_mode(mode),
        Err(error) => {
            compose::line(out, error.reply());
            return Ok(Ok(()));
        }
    };
    let expiry = expiry_flag(flags, b'T', now_secs)?.unwrap_or(Expiry::NEVER);
    let write = Write {
        key: &meta.key,
        value: meta.data,
        client_flags: flags.number::<u32>(b'F').map_err(|_| ())?.unwrap_or(0),
        expiry,
        mode,
        compare_cas: cas_flag(flags, b'C')?,
        invalidate: flags.has(b'I'),
        new_cas: cas_flag(flags, b'E')?,
    };
    let mut stored = match store.store(now_secs, &write) {
        Ok(stored) => stored,
        Err(error) => return Ok(Err(error)),
    };
    // Append mode with N creates the item on a miss (autovivify).
    if stored == Stored::NotStored && matches!(mode, Mode::Append | Mode::Prepend) {
        if let Some(vivify) = expiry_flag(flags, b'N', now_secs)? {
            let create = Write {
                mode: Mode::Add,
                expiry: vivify,
                ..write
            };
            stored = match store.store(now_secs, &create) {
                Ok(stored) => stored,
                Err(error) => return Ok(Err(error)),
            };
        }
    }
    let (code, cas) = match stored {
        Stored::Stored(cas) => (b"HD", Some(cas)),
        Stored::NotStored => (b"NS", None),
        Stored::Exists => (b"EX", None),
        Stored::NotFound => (b"NF", None),
        Stored::TooLarge => {
            compose::line(out, TOO_LARGE);
            return Ok(Ok(()));
        }
    };
    if flags.quiet() && code == b"HD" {
        return Ok(Ok(()));
    }
    compose::meta_header(out, code, None);
    let returned = Returned {
        cas,
        ..Returned::default()
    };
    echo_flags(meta, returned, out);
    out.extend_from_slice(b"\r\n");
    Ok(Ok(()))
}

fn meta_delete(
    meta: &Meta,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> MetaResult {
    let flags = &meta.flags;
    let how = Delete {
        compare_cas: cas_flag(flags, b'C')?,
        invalidate: match flags.has(b'I') {
            true => Some(expiry_flag(flags, b'T', now_secs)?),
            false => None,
        },
        drop_value: flags.has(b'x'),
        new_cas: cas_flag(flags, b'E')?,
    };
    let deleted = match store.delete(now_secs, &meta.key, &how) {
        Ok(deleted) => deleted,
        Err(error) => return Ok(Err(error)),
    };
    let code = match deleted {
        Deleted::Deleted => b"HD",
        Deleted::NotFound => b"NF",
        Deleted::Exists => b"EX",
    };
    if flags.quiet() && code == b"HD" {
        return Ok(Ok(()));
    }
    compose::meta_header(out, code, None);
    echo_flags(meta, Returned::default(), out);
    out.extend_from_slice(b"\r\n");
    Ok(Ok(()))
}

fn meta_arithmetic(
    meta: &Meta,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> MetaResult {
    let flags = &meta.flags;
    let incr = match flags.direction() {
        Ok(direction) => direction == Direction::Incr,
        Err(error) => {
            compose::line(out, error.reply());
            return Ok(Ok(()));
        }
    };
    let vivify = match expiry_flag(flags, b'N', now_secs)? {
        Some(expiry) => Some((
            expiry,
            flags.number::<u64>(b'J').map_err(|_| ())?.unwrap_or(0),
        )),
        None => None,
    };
    let touch = expiry_flag(flags, b'T', now_secs)?;
    let request = Arithmetic {
        incr,
        delta: flags.number::<u64>(b'D').map_err(|_| ())?.unwrap_or(1),
        compare_cas: cas_flag(flags, b'C')?,
        // An item created by N takes the T expiry when both are given, as memcached does.
        vivify: vivify.map(|(expiry, initial)| (touch.unwrap_or(expiry), initial)),
        touch,
        new_cas: cas_flag(flags, b'E')?,
    };
    let counted = match store.arithmetic(now_secs, &meta.key, &request) {
        Ok(counted) => counted,
        Err(error) => return Ok(Err(error)),
    };
    let (value, cas, expiry) = match counted {
        Counted::Value { value, cas, expiry } => (value, cas, expiry),
        Counted::NonNumeric => {
            compose::line(out, NON_NUMERIC);
            return Ok(Ok(()));
        }
        Counted::NotFound | Counted::Exists => {
            let code = if counted == Counted::NotFound {
                b"NF"
            } else {
                b"EX"
            };
            {
                compose::meta_header(out, code, None);
                echo_flags(meta, Returned::default(), out);
                out.extend_from_slice(b"\r\n");
            }
            return Ok(Ok(()));
        }
    };
    let digits = value.to_string();
    let with_value = flags.has(b'v');
    if flags.quiet() && !with_value {
        return Ok(Ok(()));
    }
    let code = if with_value { b"VA" } else { b"HD" };
    compose::meta_header(out, code, with_value.then_some(digits.len()));
    let returned = Returned {
        cas: Some(cas),
        ttl: Some(ttl_flag(expiry, now_secs)),
        ..Returned::default()
    };
    echo_flags(meta, returned, out);
    out.extend_from_slice(b"\r\n");
    if with_value {
        out.extend_from_slice(digits.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    Ok(Ok(()))
}

fn meta_debug(
    meta: &Meta,
    store: &mut dyn Storage,
    now_secs: u32,
    out: &mut Vec<u8>,
) -> MetaResult {
    let lookup = Lookup {
        no_bump: true,
        ..Lookup::default()
    };
    let found = match store.get(now_secs, &meta.key, &lookup) {
        Ok(found) => found,
        Err(error) => return Ok(Err(error)),
    };
    let Some(found) = found else {
        compose::line(out, "EN");
        return Ok(Ok(()));
    };
    let expires = ttl_flag(found.expiry, now_secs);
    out.extend_from_slice(b"ME ");
    out.extend_from_slice(meta.wire_key);
    let line = format!(
        " exp={expires} la={} cas={} fetch={} cls=1 size={}",
        found.idle_secs,
        found.cas,
        if found.hit_before { "yes" } else { "no" },
        found.value_len
    );
    compose::line(out, &line);
    Ok(Ok(()))
}
