//! The workload of a run: where the server is, how many connections and requests in flight,
//! for how long, and which keys, values and operations.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use heterarchy_memcache::PROTOCOL_MAX_KEY_BYTES;

use crate::error::{ArgError, LoadError};
use crate::keys::KeySpace;
use crate::schedule::RateSchedule;
use crate::verify::NAMED_BYTES;

/// The largest value asked for: memcached's largest item size (`-I 1024m`). The run holds the
/// whole value in memory once.
pub const VALUE_BYTES_MAX: usize = 1 << 30;

/// The most keys a verified run keeps the state of (nine bytes each).
pub const VERIFIED_KEYS_MAX: u64 = 1 << 30;

/// Where the server listens: `HOST:PORT` or `unix:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerAddr {
    Tcp(String),
    Unix(PathBuf),
}

impl ServerAddr {
    /// The addresses a TCP host name stands for (empty for a Unix socket).
    pub(crate) fn resolve(&self) -> Result<Vec<SocketAddr>, LoadError> {
        match self {
            ServerAddr::Tcp(text) => {
                text.to_socket_addrs()
                    .map(Iterator::collect)
                    .map_err(|error| LoadError::Connect {
                        server: self.to_string(),
                        error,
                    })
            }
            ServerAddr::Unix(_) => Ok(Vec::new()),
        }
    }
}

impl FromStr for ServerAddr {
    type Err = ArgError;

    fn from_str(text: &str) -> Result<ServerAddr, ArgError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ArgError::NoSocketPath);
            }
            return Ok(ServerAddr::Unix(PathBuf::from(path)));
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(ServerAddr::Tcp(text.to_string()))
            }
            _ => Err(ArgError::bad(
                "server address",
                text,
                "expected HOST:PORT (127.0.0.1:11211) or unix:PATH",
            )),
        }
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddr::Tcp(addr) => f.write_str(addr),
            ServerAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// How keys are chosen for each request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// Key index k (from 0) with probability ∝ 1/(k+1)^θ.
    Zipf(f64),
}

impl FromStr for Distribution {
    type Err = ArgError;

    fn from_str(text: &str) -> Result<Distribution, ArgError> {
        let expected = || {
            ArgError::bad(
                "key distribution",
                text,
                "expected uniform or zipf:THETA (zipf:0.99)",
            )
        };
        if text == "uniform" {
            return Ok(Distribution::Uniform);
        }
        let theta: f64 = text
            .strip_prefix("zipf:")
            .ok_or_else(expected)?
            .parse()
            .map_err(|_| expected())?;
        if theta.is_finite() && theta > 0.0 {
            Ok(Distribution::Zipf(theta))
        } else {
            Err(ArgError::bad(
                "key distribution",
                text,
                "the Zipf exponent must be above 0",
            ))
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipf(theta) => write!(f, "zipf:{theta}"),
        }
    }
}

/// Parses a duration written as seconds or milliseconds: `10s`, `1.5s`, `500ms`.
pub fn parse_duration(text: &str) -> Result<Duration, ArgError> {
    let expected = || ArgError::Duration {
        text: text.to_string(),
    };
    let trimmed = text.trim();
    let (number, seconds_per_unit) = if let Some(number) = trimmed.strip_suffix("ms") {
        (number, 1e-3)
    } else if let Some(number) = trimmed.strip_suffix('s') {
        (number, 1.0)
    } else {
        return Err(expected());
    };
    let value: f64 = number.trim().parse().map_err(|_| expected())?;
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| expected())
}

/// One run's workload.
#[derive(Clone, Debug)]
pub struct Config {
    /// The server to load.
    pub server: ServerAddr,
    /// Connections opened, each a closed loop of `pipeline` requests.
    pub connections: usize,
    /// Requests outstanding per connection.
    pub pipeline: usize,
    /// Event-loop threads; the connections are dealt out among them.
    pub threads: usize,
    /// The measured time.
    pub duration: Duration,
    /// Unmeasured time with the same load before the measured time.
    pub warmup: Duration,
    /// The keyspace size: key indexes run from 0 to `keys - 1`.
    pub keys: u64,
    /// The length of every key.
    pub key_bytes: usize,
    /// The length of every value set.
    pub value_bytes: usize,
    /// The fraction of requests that are gets.
    pub get_ratio: f64,
    /// The fraction of requests that are deletes; the rest (after gets) are sets.
    pub delete_ratio: f64,
    /// The fraction of gets that ask for keys the run never sets (they must miss).
    pub miss_ratio: f64,
    /// Check every reply against what the run wrote (`verify.rs`); every value then names its
    /// key and version, and no two requests of one key are outstanding at once.
    pub verify: bool,
    /// How each request's key is chosen.
    pub distribution: Distribution,
    /// Set every key once before the warm-up, so that gets hit.
    pub prefill: bool,
    /// The seed of the key and operation choices.
    pub seed: u64,
    /// Requests sent a second at most, over all connections, and how that moves over the run
    /// (none: as fast as replies come): a light tenant beside a heavy one, a burst, a day
    /// (seed 000 §5.3).
    pub rate: Option<RateSchedule>,
    /// Report throughput and p99 for each interval this long of the measured time.
    pub interval: Option<Duration>,
}

impl Config {
    /// The keys requests name: the `keys` the run writes, and as many it never writes when
    /// some gets are to miss.
    pub(crate) fn keyspace(&self) -> u64 {
        if self.miss_ratio > 0.0 {
            self.keys.saturating_mul(2)
        } else {
            self.keys
        }
    }

    /// Checks that the workload can run, saying which setting is wrong if not.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |flag: &str, reason: String| {
            Err(LoadError::Config {
                flag: flag.to_string(),
                reason,
            })
        };
        if self.connections == 0 || self.pipeline == 0 || self.threads == 0 {
            return bad(
                "--connections, --pipeline and --threads",
                "must be at least 1".into(),
            );
        }
        if self.threads > self.connections {
            return bad(
                "--threads",
                format!(
                    "{} is more than --connections {}: every thread needs a connection",
                    self.threads, self.connections
                ),
            );
        }
        if self.duration.is_zero() {
            return bad("--duration", "must be above 0".into());
        }
        if self.keys == 0 {
            return bad("--keys", "must be at least 1".into());
        }
        if let Some(schedule) = &self.rate {
            schedule.check()?;
        }
        if self.interval.is_some_and(|interval| interval.is_zero()) {
            return bad("--interval", "must be above 0".into());
        }
        if !(1..=PROTOCOL_MAX_KEY_BYTES).contains(&self.key_bytes) {
            return bad(
                "--key-bytes",
                format!(
                    "{} is outside the protocol's 1 to {PROTOCOL_MAX_KEY_BYTES}",
                    self.key_bytes
                ),
            );
        }
        if !KeySpace::fits(self.keyspace(), self.key_bytes) {
            return bad(
                "--keys",
                format!(
                    "{} distinct keys{} do not fit in {} bytes",
                    self.keys,
                    if self.miss_ratio > 0.0 {
                        " and as many for --miss-ratio"
                    } else {
                        ""
                    },
                    self.key_bytes
                ),
            );
        }
        if self.value_bytes > VALUE_BYTES_MAX {
            return bad(
                "--value-bytes",
                format!(
                    "{} is more than memcached's largest item, {} MiB",
                    self.value_bytes,
                    VALUE_BYTES_MAX >> 20
                ),
            );
        }
        for (flag, ratio) in [
            ("--get-ratio", self.get_ratio),
            ("--delete-ratio", self.delete_ratio),
            ("--miss-ratio", self.miss_ratio),
        ] {
            if !(0.0..=1.0).contains(&ratio) {
                return bad(flag, format!("{ratio} is not a fraction between 0 and 1"));
            }
        }
        if self.get_ratio + self.delete_ratio > 1.0 {
            return bad(
                "--get-ratio",
                format!(
                    "{} and --delete-ratio {} add up to more than 1",
                    self.get_ratio, self.delete_ratio
                ),
            );
        }
        if self.verify {
            if self.value_bytes < NAMED_BYTES {
                return bad(
                    "--verify",
                    format!(
                        "needs --value-bytes of at least {NAMED_BYTES} (a value names its key and \
                     version), not {}",
                        self.value_bytes
                    ),
                );
            }
            let outstanding = (self.connections as u64).saturating_mul(self.pipeline as u64);
            if self.keys < outstanding.saturating_mul(2) {
                return bad(
                    "--verify",
                    format!(
                    "needs --keys at least twice the requests outstanding ({outstanding}), not \
                     {}: a key has one request outstanding at a time",
                    self.keys
                ),
                );
            }
            if self.keys > VERIFIED_KEYS_MAX {
                return bad(
                    "--verify",
                    format!(
                        "keeps every key's state: at most {VERIFIED_KEYS_MAX} --keys, not {}",
                        self.keys
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_are_host_port_or_unix_paths() {
        assert_eq!(
            "127.0.0.1:11211".parse(),
            Ok(ServerAddr::Tcp("127.0.0.1:11211".into()))
        );
        assert_eq!(
            "unix:/tmp/mc.sock".parse(),
            Ok(ServerAddr::Unix("/tmp/mc.sock".into()))
        );
        for bad in [
            "127.0.0.1",
            ":11211",
            "host:port",
            "unix:",
            "127.0.0.1:70000",
        ] {
            assert!(bad.parse::<ServerAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn distributions_parse_and_reject_bad_exponents() {
        assert_eq!("uniform".parse(), Ok(Distribution::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(Distribution::Zipf(0.99)));
        for bad in ["zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:nan", "normal"] {
            assert!(bad.parse::<Distribution>().is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_take_seconds_and_milliseconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["10", "s", "-1s", "1m", "fast"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    /// The CLI's defaults.
    fn default_config() -> Config {
        Config {
            server: ServerAddr::Tcp("127.0.0.1:11211".into()),
            connections: 32,
            pipeline: 1,
            threads: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            keys: 100_000,
            key_bytes: 32,
            value_bytes: 100,
            get_ratio: 0.9,
            delete_ratio: 0.0,
            miss_ratio: 0.0,
            verify: false,
            distribution: Distribution::Uniform,
            prefill: true,
            seed: 1,
            rate: None,
            interval: None,
        }
    }

    #[test]
    fn validation_names_the_bad_setting() {
        assert!(default_config().validate().is_ok());
        /// A change that makes the config invalid, and the setting the error must name.
        type Case = (fn(&mut Config), &'static str);
        let cases: [Case; 9] = [
            (|config| config.key_bytes = 2, "--keys 100000"),
            (|config| config.threads = 33, "--threads 33"),
            (|config| config.duration = Duration::ZERO, "--duration"),
            (|config| config.get_ratio = f64::NAN, "--get-ratio NaN"),
            (
                |config| config.value_bytes = VALUE_BYTES_MAX + 1,
                "--value-bytes",
            ),
            (|config| config.delete_ratio = 0.2, "add up to more than 1"),
            (
                |config| {
                    config.verify = true;
                    config.value_bytes = 31;
                },
                "--value-bytes of at least 32",
            ),
            (
                |config| {
                    config.verify = true;
                    config.keys = 63;
                },
                "twice the requests outstanding (32)",
            ),
            (
                |config| {
                    config.key_bytes = 3;
                    config.keys = 200_000;
                    config.miss_ratio = 0.1;
                },
                "and as many for --miss-ratio",
            ),
        ];
        for (spoil, named) in cases {
            let mut config = default_config();
            spoil(&mut config);
            let message = config.validate().unwrap_err().to_string();
            assert!(message.contains(named), "{message}");
        }
    }
}
