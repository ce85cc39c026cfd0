//! Progress bars for work longer than a moment, drawn only on a terminal (indicatif hides
//! them when stderr is not one, so piped and CI output stays clean).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting requests towards `total`, or a spinner when the total is unknown.
pub fn requests_bar(total: Option<u64>, message: &str) -> ProgressBar {
    let bar = match total {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {human_pos}/{human_len} requests ({elapsed}, eta {eta})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg} {human_pos} requests ({elapsed})")
                .expect("valid template"),
        ),
    };
    bar.set_message(message.to_string());
    bar
}
