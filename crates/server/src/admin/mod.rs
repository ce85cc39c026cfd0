//! The HTTP admin endpoint (docs/architecture.md, "Serving"): `GET /metrics` in Prometheus' text
//! format (volumes and key-value tenants), `GET /stats` as JSON (`{"exports": [...],
//! "tenants": [...]}`), `POST /flush?export=NAME` to write an export's dirty lines back
//! (`heterarchy volume flush`), and `GET /` (or `/index.html`): a live dashboard, one
//! self-contained page (`assets/dashboard.html`: inline CSS and JavaScript, no outside asset, so
//! it works with no network) that reads `/stats` every second and charts the last five minutes.
//!
//! Served by a bounded HTTP/1.1 server of its own ([`http`], [`server`]; docs/reliability.md,
//! "The admin port"), with [`Access`] in front of the routes: a request's Host must be an IP
//! literal, `localhost` or a name of `admin_allowed_hosts` (a web page that rebinds its own
//! name to the server's address cannot read it), and every method but GET needs the token of
//! `admin_token_file` as `Authorization: Bearer TOKEN` (docs/block-volumes.md, "The admin
//! endpoint").

pub mod http;
pub mod server;

use std::fmt::Write as _;
use std::io::Read as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use heterarchy_volume::{DeviceStats, TierStats, Volume, VolumeStats};

use crate::kv::counters::MetricKind;
use crate::kv::tenant::NyxStats;
use crate::kv::{Tenant, TenantStats};

pub use http::{Limits, Request, Response, DEFAULT_LIMITS};
pub use server::Server;

/// What a server serves: its volumes and its key-value tenants.
pub struct Served {
    pub volumes: Vec<Arc<Volume>>,
    pub tenants: Vec<Arc<Tenant>>,
}

/// Who may ask what: the token that every method but GET needs, and the host names answered
/// besides IP literals and `localhost`.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// SHA-256 of the token, so that comparing takes the same time whatever its length.
    token: Option<[u8; 32]>,
    allowed_hosts: Vec<String>,
}

impl Access {
    pub fn new(token: Option<&str>, allowed_hosts: &[String]) -> Access {
        Access {
            token: token.map(|token| openssl::sha::sha256(token.as_bytes())),
            allowed_hosts: allowed_hosts
                .iter()
                .map(|host| host.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether `host`, a Host header's value, names this server as one that may be asked:
    /// an IP literal or `localhost` with any port, or an allowed name.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if name.starts_with('[') || name.parse::<Ipv4Addr>().is_ok() {
            return true;
        }
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        name == "localhost" || self.allowed_hosts.contains(&name)
    }

    /// Whether `authorization`, an Authorization header's value, carries the token.
    fn authorized(&self, authorization: Option<&str>) -> bool {
        let Some(expected) = &self.token else {
            return false;
        };
        let Some((scheme, token)) = authorization.and_then(|value| value.split_once(' ')) else {
            return false;
        };
        let given = openssl::sha::sha256(token.trim_start_matches(' ').as_bytes());
        // Both sides are 32 bytes: the comparison's time tells nothing of the token.
        scheme.eq_ignore_ascii_case("bearer") && openssl::memcmp::eq(&given, expected)
    }
}

/// The host part of a Host header's value (RFC 9110 §7.2: `uri-host [ ":" port ]`), an IPv6
/// literal in its brackets, checked; None when it is not one.
fn host_name(host: &str) -> Option<&str> {
    let port_ok = |port: &str| port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    if host.starts_with('[') {
        let close = host.find(']')?;
        host[1..close].parse::<Ipv6Addr>().ok()?;
        let rest = &host[close + 1..];
        if !rest.is_empty() && !rest.strip_prefix(':').is_some_and(port_ok) {
            return None;
        }
        return Some(&host[..=close]);
    }
    let (name, port) = host.rsplit_once(':').unwrap_or((host, ""));
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
    (name_ok && port_ok(port)).then_some(name)
}

/// Reads a token file: its text without the white space around it; at most 4 KiB, and
/// something.
pub fn read_token(path: &Path) -> Result<String, String> {
    const MAX_TOKEN_BYTES: u64 = 4096;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_TOKEN_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let token = text.trim();
    if text.len() as u64 > MAX_TOKEN_BYTES {
        return Err(format!(
            "{}: a token is at most {MAX_TOKEN_BYTES} bytes",
            path.display()
        ));
    }
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(format!(
            "{}: expected a token, one word (e.g. from `openssl rand -hex 32`)",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// Binds the admin port on `address` (HOST:PORT) with the default limits and starts its
/// handler threads; [`Server::run`] then serves it.
pub fn bind(address: &str, served: Served, access: Access) -> std::io::Result<Server> {
    let listener = std::net::TcpListener::bind(address)?;
    let handler = move |request: &Request| handle(request, &served, &access);
    Server::new(listener, DEFAULT_LIMITS, Arc::new(handler))
}

/// The answer to `request`: the Host and token checked, then the routes.
pub fn handle(request: &Request, served: &Served, access: &Access) -> Response {
    let host = request.header("host").unwrap_or("");
    if !access.host_allowed(host) {
        return Response::error(
            421,
            &format!(
                "this server does not answer for the host \"{host}\": ask it by IP address or \
                 localhost, or name the host in admin_allowed_hosts under [server]"
            ),
        );
    }
    if request.method != "GET" {
        if access.token.is_none() {
            return Response::error(
                403,
                &format!(
                    "{} needs a token and none is configured: set admin_token_file under \
                     [server] (serve nbd and serve kv: --admin-token-file FILE)",
                    request.method
                ),
            );
        }
        if !access.authorized(request.header("authorization")) {
            return Response::error(
                401,
                &format!(
                    "{} needs Authorization: Bearer TOKEN, the token in the server's \
                     admin_token_file",
                    request.method
                ),
            )
            .with_header("WWW-Authenticate", "Bearer realm=\"heterarchy admin\"");
        }
    }
    let (status, content_type, body) = respond(&request.method, &request.target, served);
    Response::new(status, content_type, body)
}

const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON: &str = http::JSON;
const HTML: &str = "text/html; charset=utf-8";

/// The dashboard page, built into the binary so that the server needs no files beside it.
const DASHBOARD: &str = include_str!("../../assets/dashboard.html");

fn respond(method: &str, url: &str, served: &Served) -> (u16, &'static str, String) {
    let volumes = &served.volumes;
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    match (method, path) {
        ("GET", "/" | "/index.html") => (200, HTML, DASHBOARD.to_string()),
        ("GET", "/metrics") => {
            let stats: Vec<VolumeStats> = volumes.iter().map(|v| v.stats()).collect();
            let tenants: Vec<TenantStats> = served.tenants.iter().map(|t| t.stats()).collect();
            let mut text = prometheus_text(&stats);
            text.push_str(&tenant_metrics(&tenants));
            (200, TEXT, text)
        }
        ("GET", "/stats") => {
            let exports: Vec<VolumeStats> = volumes.iter().map(|v| v.stats()).collect();
            let tenants: Vec<TenantStats> = served.tenants.iter().map(|t| t.stats()).collect();
            let body = serde_json::json!({"exports": exports, "tenants": tenants});
            (
                200,
                JSON,
                serde_json::to_string_pretty(&body).unwrap_or_default(),
            )
        }
        ("POST", "/flush") => {
            let wanted = query
                .split('&')
                .find_map(|pair| pair.strip_prefix("export="))
                .unwrap_or("");
            let Some(volume) = volumes.iter().find(|v| v.name() == wanted) else {
                return (
                    404,
                    JSON,
                    json_error(&format!("no export named \"{wanted}\"")),
                );
            };
            match volume.clean() {
                Ok(lines) => (
                    200,
                    JSON,
                    serde_json::json!({"export": wanted, "lines_written_back": lines}).to_string(),
                ),
                Err(error) => (500, JSON, json_error(&error.to_string())),
            }
        }
        _ => (
            404,
            JSON,
            json_error("expected GET / (the dashboard), GET /metrics, GET /stats or POST /flush?export=NAME"),
        ),
    }
}

fn json_error(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}

/// Every volume's stats as Prometheus metrics, labelled by export.
pub fn prometheus_text(volumes: &[VolumeStats]) -> String {
    type Field = fn(&VolumeStats) -> f64;
    let metrics: [(&str, &str, &str, Field); 20] = [
        ("reads_total", "counter", "NBD reads served", |s| {
            s.reads as f64
        }),
        ("writes_total", "counter", "NBD writes served", |s| {
            s.writes as f64
        }),
        (
            "read_bytes_total",
            "counter",
            "Bytes read by clients",
            |s| s.read_bytes as f64,
        ),
        (
            "write_bytes_total",
            "counter",
            "Bytes written by clients",
            |s| s.write_bytes as f64,
        ),
        ("flushes_total", "counter", "NBD flushes served", |s| {
            s.flushes as f64
        }),
        ("trims_total", "counter", "NBD trims served", |s| {
            s.trims as f64
        }),
        (
            "line_requests_total",
            "counter",
            "Cache-line accesses planned",
            |s| s.line_requests as f64,
        ),
        (
            "hits_total",
            "counter",
            "Cache-line accesses the cache held",
            |s| s.hits as f64,
        ),
        (
            "misses_total",
            "counter",
            "Cache-line accesses the cache did not hold",
            |s| s.misses as f64,
        ),
        (
            "writebacks_total",
            "counter",
            "Dirty lines written back",
            |s| s.writebacks as f64,
        ),
        (
            "cutoff_bypasses_total",
            "counter",
            "Requests sent around the cache by sequential cutoff",
            |s| s.cutoff_bypasses as f64,
        ),
        (
            "went_around_total",
            "counter",
            "Request pieces a failing cache could not serve, served by the backing store",
            |s| s.went_around as f64,
        ),
        ("resident_lines", "gauge", "Lines in the cache", |s| {
            s.resident_lines as f64
        }),
        (
            "dirty_lines",
            "gauge",
            "Lines with data newer than the backing store",
            |s| s.dirty_lines as f64,
        ),
        (
            "passthrough",
            "gauge",
            "1 once the cache was given up for pass-through (docs/architecture.md, Faults)",
            |s| f64::from(u8::from(s.state.starts_with("pass-through"))),
        ),
        (
            "stranded_lines",
            "gauge",
            "Lines whose data only a failing cache holds; requests touching them fail",
            |s| s.stranded_lines as f64,
        ),
        ("slots", "gauge", "Lines the cache can hold", |s| {
            s.slots as f64
        }),
        ("size_bytes", "gauge", "Size of the volume", |s| {
            s.size_bytes as f64
        }),
        (
            "admission_load_admit",
            "gauge",
            "NHC load_admit: share of clean hits served by the cache",
            |s| s.admission.as_ref().map_or(1.0, |a| a.load_admit),
        ),
        (
            "admission_data_admit",
            "gauge",
            "NHC data_admit: 1 when read misses are installed",
            |s| {
                s.admission
                    .as_ref()
                    .map_or(1.0, |a| f64::from(u8::from(a.data_admit)))
            },
        ),
    ];
    let mut text = String::new();
    for (name, kind, help, field) in metrics {
        let samples = volumes.iter().map(|s| (export_label(s), field(s)));
        family(&mut text, &format!("volume_{name}"), kind, help, samples);
    }
    type DeviceField = fn(&DeviceStats) -> u64;
    let devices: [(&str, &str, DeviceField); 3] = [
        (
            "device_read_bytes_total",
            "Bytes moved on each device",
            |d| d.read_bytes,
        ),
        (
            "device_write_bytes_total",
            "Bytes moved on each device",
            |d| d.write_bytes,
        ),
        (
            "device_errors_total",
            "Operations that failed on each device",
            |d| d.errors,
        ),
    ];
    for (name, help, field) in devices {
        let samples = volumes.iter().flat_map(|s| {
            s.devices.iter().map(move |device| {
                let labels = format!("{},device=\"{}\"", export_label(s), device.role);
                (labels, field(device) as f64)
            })
        });
        let name = format!("volume_{name}");
        family(&mut text, &name, "counter", help, samples);
    }
    type TierField = fn(&TierStats) -> u64;
    let tier_metrics: [(&str, &str, &str, TierField); 5] = [
        (
            "tier_resident_lines",
            "gauge",
            "Lines a cache tier holds",
            |t| t.resident_lines,
        ),
        (
            "tier_dirty_lines",
            "gauge",
            "Lines of a cache tier with data newer than the backing store",
            |t| t.dirty_lines,
        ),
        (
            "tier_hits_total",
            "counter",
            "Line accesses whose highest copy was in the tier",
            |t| t.hits,
        ),
        (
            "tier_installs_total",
            "counter",
            "Lines installed into the tier",
            |t| t.installs,
        ),
        (
            "tier_evictions_total",
            "counter",
            "Lines evicted from the tier",
            |t| t.evictions,
        ),
    ];
    for (name, kind, help, field) in tier_metrics {
        let samples = volumes.iter().flat_map(|s| {
            s.tiers.iter().map(move |tier| {
                let labels = format!("{},tier=\"{}\"", export_label(s), tier.tier);
                (labels, field(tier) as f64)
            })
        });
        family(&mut text, &format!("volume_{name}"), kind, help, samples);
    }
    let states = volumes.iter().filter_map(|s| {
        let admission = s.admission.as_ref()?;
        let labels = format!("{},state=\"{}\"", export_label(s), escape(&admission.state));
        Some((labels, 1.0))
    });
    let help = "NHC's state (1 for the current one)";
    family(&mut text, "volume_admission_state", "gauge", help, states);
    text
}

/// Every key-value tenant's stats as Prometheus metrics, labelled by tenant: memcached's stat
/// names, counters with `_total`.
pub fn tenant_metrics(tenants: &[TenantStats]) -> String {
    let label = |s: &TenantStats| format!("tenant=\"{}\"", escape(&s.name));
    let mut text = String::new();
    let named: Vec<_> = tenants.iter().map(|s| s.front.named()).collect();
    let Some(first) = named.first() else {
        return text;
    };
    for (at, &(name, kind, help, _)) in first.iter().enumerate() {
        let samples = tenants
            .iter()
            .zip(&named)
            .map(|(s, counts)| (label(s), counts[at].3 as f64));
        let (name, kind) = match kind {
            MetricKind::Counter => (format!("kv_{name}_total"), "counter"),
            MetricKind::Gauge => (format!("kv_{name}"), "gauge"),
        };
        family(&mut text, &name, kind, help, samples);
    }
    type NyxField = fn(&NyxStats) -> f64;
    let nyx: [(&str, &str, &str, NyxField); 5] = [
        (
            "kv_nyx_cost_seconds_total",
            "counter",
            "device time the tenant's accesses cost on its shared PM (its rate: utilization)",
            |n| n.nyx_cost_seconds,
        ),
        (
            "kv_nyx_accesses_total",
            "counter",
            "accesses to the shared PM",
            |n| n.nyx_accesses as f64,
        ),
        (
            "kv_nyx_bytes_total",
            "counter",
            "bytes moved to and from the shared PM",
            |n| n.nyx_bytes as f64,
        ),
        (
            "kv_nyx_rate_cap_per_second",
            "gauge",
            "the tenant's throttle: accesses a second it may make (0: unthrottled)",
            |n| n.nyx_rate_cap_per_second,
        ),
        (
            "kv_nyx_slowdown",
            "gauge",
            "the tenant's slowdown as its policy last estimated it, T_alone / T_shared (0: none)",
            |n| n.nyx_slowdown,
        ),
    ];
    let p99 = tenants.iter().map(|s| (label(s), s.latency.p99_latency_us));
    family(
        &mut text,
        "kv_p99_latency_us",
        "gauge",
        "p99 latency of the last 500 ms window, from a request arriving to its answer being due",
        p99,
    );
    for (name, kind, help, field) in nyx {
        let samples: Vec<(String, f64)> = tenants
            .iter()
            .filter_map(|s| Some((label(s), field(s.nyx.as_ref()?))))
            .collect();
        if !samples.is_empty() {
            family(&mut text, name, kind, help, samples);
        }
    }
    let Some(first) = tenants.first() else {
        return text;
    };
    const GAUGES: [&str; 6] = [
        "curr_items",
        "bytes",
        "limit_maxbytes",
        "segments_in_use",
        "index_bytes",
        "index_max_bytes",
    ];
    for name in first.store_stats.0.keys() {
        let samples = tenants.iter().map(|s| {
            (
                label(s),
                s.store_stats.0.get(name).copied().unwrap_or(0) as f64,
            )
        });
        if GAUGES.contains(name) {
            family(
                &mut text,
                &format!("kv_{name}"),
                "gauge",
                "store occupancy",
                samples,
            );
        } else {
            family(
                &mut text,
                &format!("kv_{name}_total"),
                "counter",
                "store events",
                samples,
            );
        }
    }
    text
}

/// One metric family: its HELP and TYPE lines, then a sample per label set.
fn family(
    text: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (String, f64)>,
) {
    let _ = writeln!(text, "# HELP heterarchy_{name} {help}.");
    let _ = writeln!(text, "# TYPE heterarchy_{name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(text, "heterarchy_{name}{{{labels}}} {value}");
    }
}

fn export_label(stats: &VolumeStats) -> String {
    format!("export=\"{}\"", escape(&stats.name))
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use heterarchy_volume::VolumeConfig;

    #[test]
    fn metrics_carry_every_export() {
        let config = VolumeConfig::new(
            "a\"b",
            "ram:1m".parse().unwrap(),
            "ram:256k".parse().unwrap(),
        );
        let volume = Volume::open(&config).unwrap();
        volume.write(0, &[1; 4096], false).unwrap();
        volume.read(0, &mut [0; 4096]).unwrap();
        let text = prometheus_text(&[volume.stats()]);
        assert!(
            text.contains("heterarchy_volume_hits_total{export=\"a\\\"b\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("heterarchy_volume_device_write_bytes_total{export=\"a\\\"b\",device=\"backing\"} 4096\n"), "{text}");
        assert!(
            text.contains("heterarchy_volume_tier_hits_total{export=\"a\\\"b\",tier=\"0\"} 1\n"),
            "{text}"
        );
        assert!(text
            .contains("heterarchy_volume_tier_resident_lines{export=\"a\\\"b\",tier=\"0\"} 1\n"));
        let served = Served {
            volumes: vec![Arc::new(volume)],
            tenants: Vec::new(),
        };
        let (status, _, body) = respond("POST", "/flush?export=nope", &served);
        assert_eq!(status, 404, "{body}");
        let (status, _, body) = respond("GET", "/stats", &served);
        assert_eq!(status, 200);
        assert!(body.contains("\"hits\": 1"), "{body}");
    }

    fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            method: method.to_string(),
            target: target.to_string(),
            minor: 1,
            headers: headers
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn hosts_are_ip_literals_localhost_or_allowed_names() {
        let access = Access::new(None, &["Metrics.Internal.".to_string()]);
        for host in [
            "127.0.0.1",
            "127.0.0.1:9109",
            "10.1.2.3:80",
            "[::1]",
            "[::1]:9109",
            "[::1]:",
            "[2001:db8::1]",
            "localhost",
            "LocalHost:9109",
            "localhost.",
            "metrics.internal",
            "metrics.internal:9109",
            "METRICS.INTERNAL.",
        ] {
            assert!(access.host_allowed(host), "{host}");
        }
        for host in [
            "",
            ":9109",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "127.1",
            "::1",
            "[::1",
            "[::1]x",
            "[evil.example]",
            "127.0.0.1:port",
            "127.0.0.1:123456",
            "local host",
            "localhost:9109:1",
            "metrics.internal.evil",
        ] {
            assert!(!access.host_allowed(host), "{host}");
        }
    }

    #[test]
    fn every_method_but_get_needs_the_token_and_a_bad_host_is_refused_first() {
        let served = Served {
            volumes: Vec::new(),
            tenants: Vec::new(),
        };
        let open = Access::new(None, &[]);
        let host = ("Host", "127.0.0.1:9109");
        let get = handle(&request("GET", "/stats", &[host]), &served, &open);
        assert_eq!(get.status, 200);
        let post = request(
            "POST",
            "/flush?export=v",
            &[host, ("Authorization", "Bearer t")],
        );
        let refused = handle(&post, &served, &open);
        assert_eq!(refused.status, 403);
        assert!(String::from_utf8_lossy(&refused.body).contains("admin_token_file"));
        let access = Access::new(Some("right-token"), &[]);
        for authorization in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Bearer wrong"),
            Some("Bearer right-toke"),
            Some("Bearer right-token2"),
            Some("Basic right-token"),
            Some("right-token"),
        ] {
            let mut headers = vec![host];
            headers.extend(authorization.map(|value| ("Authorization", value)));
            let answer = handle(
                &request("POST", "/flush?export=v", &headers),
                &served,
                &access,
            );
            assert_eq!(answer.status, 401, "{authorization:?}");
            assert!(answer
                .headers
                .iter()
                .any(|(name, _)| *name == "WWW-Authenticate"));
        }
        for authorization in ["Bearer right-token", "bearer  right-token"] {
            let headers = [host, ("Authorization", authorization)];
            let answer = handle(
                &request("POST", "/flush?export=v", &headers),
                &served,
                &access,
            );
            // Past the token: the route's own answer, no such export.
            assert_eq!(answer.status, 404, "{authorization}");
        }
        let rebound = [
            ("Host", "rebound.example"),
            ("Authorization", "Bearer right-token"),
        ];
        for method in ["GET", "POST"] {
            let answer = handle(&request(method, "/stats", &rebound), &served, &access);
            assert_eq!(answer.status, 421);
            assert!(String::from_utf8_lossy(&answer.body).contains("admin_allowed_hosts"));
        }
    }

    #[test]
    fn a_token_file_holds_one_word() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc123\n").unwrap();
        assert_eq!(read_token(&path).unwrap(), "abc123");
        for bad in ["", "\n", "two words", &"x".repeat(5000)] {
            std::fs::write(&path, bad).unwrap();
            let error = read_token(&path).unwrap_err();
            assert!(error.starts_with(&path.display().to_string()), "{error}");
        }
        assert!(read_token(&dir.path().join("missing"))
            .unwrap_err()
            .contains("cannot read"));
    }

    #[test]
    fn the_dashboard_is_one_page_that_reads_stats_and_loads_nothing_from_outside() {
        let served = Served {
            volumes: Vec::new(),
            tenants: Vec::new(),
        };
        for path in ["/", "/index.html", "/?refresh=1"] {
            let (status, content_type, body) = respond("GET", path, &served);
            assert_eq!(
                (status, content_type),
                (200, "text/html; charset=utf-8"),
                "{path}"
            );
            assert!(body.starts_with("<!doctype html>"), "{path}");
            assert!(body.contains("fetch(STATS_URL") && body.contains("\"/stats\""));
            // The SVG namespace is a name, never fetched; any other URL would be an asset.
            let rest = body.replace("\"http://www.w3.org/2000/svg\"", "");
            for outside in ["http://", "https://", "src=\"//", "href=\"//", "@import"] {
                assert!(!rest.contains(outside), "the page names {outside}");
            }
        }
        let (status, _, body) = respond("POST", "/", &served);
        assert_eq!(status, 404);
        assert!(body.contains("GET / (the dashboard)"), "{body}");
    }
}
