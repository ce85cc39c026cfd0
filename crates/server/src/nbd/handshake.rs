//! Fixed newstyle negotiation (proto.md, "Fixed newstyle negotiation" and "Option types"):
//! the server greets, the client haggles over options until one chooses an export
//! (NBD_OPT_EXPORT_NAME or NBD_OPT_GO) or it aborts. Anything malformed closes only this
//! connection; an option we do not know gets NBD_REP_ERR_UNSUP and haggling goes on.

use std::io::{self, Read, Write};
use std::sync::Arc;

use heterarchy_volume::Volume;

use super::protocol::*;
use super::Exports;

/// Greets the client and haggles; returns the export chosen, or `None` when the client left.
pub fn negotiate(
    input: &mut impl Read,
    output: &mut impl Write,
    exports: &Exports,
) -> io::Result<Option<Arc<Volume>>> {
    output.write_all(&NBD_MAGIC.to_be_bytes())?;
    output.write_all(&IHAVEOPT.to_be_bytes())?;
    output.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
    output.flush()?;
    let client_flags = read_u32(input)?;
    if client_flags & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
        return Err(protocol_error("unknown client flags"));
    }
    let no_zeroes = client_flags & CLIENT_NO_ZEROES != 0;
    let mut data = Vec::new();
    loop {
        if read_u64(input)? != IHAVEOPT {
            return Err(protocol_error("option without IHAVEOPT"));
        }
        let option = read_u32(input)?;
        let length = read_u32(input)?;
        if length > MAX_OPTION_BYTES {
            io::copy(&mut input.take(u64::from(length)), &mut io::sink())?;
            reply(output, option, REP_ERR_TOO_BIG, &[])?;
            continue;
        }
        data.resize(length as usize, 0);
        input.read_exact(&mut data)?;
        match option {
            OPT_EXPORT_NAME => {
                let Some(volume) = exports.find(&data) else {
                    // proto.md: the server can only close here.
                    return Ok(None);
                };
                output.write_all(&volume.size_bytes().to_be_bytes())?;
                output.write_all(&transmission_flags().to_be_bytes())?;
                if !no_zeroes {
                    output.write_all(&[0; 124])?;
                }
                output.flush()?;
                return Ok(Some(volume));
            }
            OPT_ABORT => {
                reply(output, option, REP_ACK, &[])?;
                return Ok(None);
            }
            OPT_LIST => {
                if length != 0 {
                    reply(output, option, REP_ERR_INVALID, &[])?;
                    continue;
                }
                for name in exports.names() {
                    let mut entry = (name.len() as u32).to_be_bytes().to_vec();
                    entry.extend_from_slice(name.as_bytes());
                    reply(output, option, REP_SERVER, &entry)?;
                }
                reply(output, option, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => {
                let Some((name, requests)) = parse_info_request(&data) else {
                    reply(output, option, REP_ERR_INVALID, &[])?;
                    continue;
                };
                let Some(volume) = exports.find(name) else {
                    reply(output, option, REP_ERR_UNKNOWN, &[])?;
                    continue;
                };
                send_info(output, option, &volume, name, &requests)?;
                reply(output, option, REP_ACK, &[])?;
                if option == OPT_GO {
                    return Ok(Some(volume));
                }
            }
            _ => reply(output, option, REP_ERR_UNSUP, &[])?,
        }
    }
}

/// What every export offers: flush, FUA, trim, write zeroes, and several connections at once
/// (every connection shares one volume, whose FLUSH covers writes answered on any of them).
pub fn transmission_flags() -> u16 {
    TFLAG_HAS_FLAGS
        | TFLAG_SEND_FLUSH
        | TFLAG_SEND_FUA
        | TFLAG_SEND_TRIM
        | TFLAG_SEND_WRITE_ZEROES
        | TFLAG_CAN_MULTI_CONN
}

/// NBD_OPT_INFO and NBD_OPT_GO data: name length, name, count of requests, requests.
fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4 + name_len)?;
    let rest = data.get(4 + name_len..)?;
    let count = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let requests = rest.get(2..)?;
    if requests.len() != 2 * count {
        return None;
    }
    let requests = requests
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
        .collect();
    Some((name, requests))
}

/// NBD_REP_INFO replies: the export's size and flags always, its block sizes always (proto.md
/// lets a server send them unasked), its name when asked.
fn send_info(
    output: &mut impl Write,
    option: u32,
    volume: &Volume,
    name: &[u8],
    requests: &[u16],
) -> io::Result<()> {
    let mut export = INFO_EXPORT.to_be_bytes().to_vec();
    export.extend_from_slice(&volume.size_bytes().to_be_bytes());
    export.extend_from_slice(&transmission_flags().to_be_bytes());
    reply(output, option, REP_INFO, &export)?;
    let mut sizes = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    for size in [MIN_BLOCK_BYTES, PREFERRED_BLOCK_BYTES, MAX_PAYLOAD_BYTES] {
        sizes.extend_from_slice(&size.to_be_bytes());
    }
    reply(output, option, REP_INFO, &sizes)?;
    if requests.contains(&INFO_NAME) {
        let shown = if name.is_empty() {
            volume.name().as_bytes()
        } else {
            name
        };
        let mut info = INFO_NAME.to_be_bytes().to_vec();
        info.extend_from_slice(shown);
        reply(output, option, REP_INFO, &info)?;
    }
    Ok(())
}

fn reply(output: &mut impl Write, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    output.write_all(&OPTION_REPLY_MAGIC.to_be_bytes())?;
    output.write_all(&option.to_be_bytes())?;
    output.write_all(&kind.to_be_bytes())?;
    output.write_all(&(data.len() as u32).to_be_bytes())?;
    output.write_all(data)?;
    output.flush()
}

fn protocol_error(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn read_u32(input: &mut impl Read) -> io::Result<u32> {
    let mut bytes = [0; 4];
    input.read_exact(&mut bytes)?;
    Ok(u32::from_be_bytes(bytes))
}

fn read_u64(input: &mut impl Read) -> io::Result<u64> {
    let mut bytes = [0; 8];
    input.read_exact(&mut bytes)?;
    Ok(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_requests_are_parsed_strictly() {
        let mut data = 3u32.to_be_bytes().to_vec();
        data.extend_from_slice(b"vol");
        data.extend_from_slice(&2u16.to_be_bytes());
        data.extend_from_slice(&INFO_NAME.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        let (name, requests) = parse_info_request(&data).unwrap();
        assert_eq!(name, b"vol");
        assert_eq!(requests, [INFO_NAME, INFO_BLOCK_SIZE]);
        assert!(parse_info_request(&data[..data.len() - 1]).is_none());
        assert!(parse_info_request(&[0, 0, 1, 0]).is_none());
        assert!(parse_info_request(&[]).is_none());
    }
}
