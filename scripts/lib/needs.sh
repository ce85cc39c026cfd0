# What the shell scripts need before they start (sourced; scripts/lib/needs.py is the Python
# scripts' counterpart). Each check that fails prints one line on stderr naming what is missing
# and how to get it, and exits 1. NEEDS_NAME is the script's name in those lines.

needs_fail() {
    echo "$NEEDS_NAME: $*" >&2
    exit 1
}

# needs_tool COMMAND DEBIAN-PACKAGE
needs_tool() {
    command -v "$1" >/dev/null || needs_fail "needs $1 on PATH: apt-get install $2 (scripts/test installs it)"
}

# cargo on PATH, from ~/.cargo/bin where a non-login shell's PATH lacks it (rustup installs it there).
needs_cargo() {
    if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
        PATH="$HOME/.cargo/bin:$PATH"
    fi
    command -v cargo >/dev/null \
        || needs_fail "needs cargo: install Rust with rustup, or run scripts/test, which installs Debian's where none is"
}
