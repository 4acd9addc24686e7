//! [`Config::validate`]: every check that can be made without binding a port.

use super::*;

impl Config {
    /// Checks every field that can be checked without binding a port.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("name", &self.name)?;
        for (field, p) in [
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
            ("keys.node", &self.keys.node),
        ] {
            if !p.is_file() {
                return Err(err(field, format!("file not found: {}", p.display())));
            }
        }
        for (i, p) in self.tls.client_ca.iter().enumerate() {
            if !p.is_file() {
                return Err(err(
                    format!("tls.client_ca[{i}]"),
                    format!("file not found: {}", p.display()),
                ));
            }
        }
        if self.tls.require_client_cert && self.tls.client_ca.is_empty() && self.peers.is_empty() {
            return Err(err(
                "tls.require_client_cert",
                "set, but no tls.client_ca and no peers to trust",
            ));
        }
        if let Some(o) = &self.log.origin
            && (o.is_empty() || o.contains(char::is_whitespace) || o.contains('+'))
        {
            return Err(err(
                "log.origin",
                "must be non-empty, without spaces or '+'",
            ));
        }
        if self.log.checkpoint_interval_ms == 0 {
            return Err(err("log.checkpoint_interval_ms", "must be > 0"));
        }

        if self.clock.tick_ms == 0 {
            return Err(err("clock.tick_ms", "must be > 0"));
        }
        if self.ledger.max_batch == 0 {
            return Err(err("ledger.max_batch", "must be > 0"));
        }
        if self.projection.cache_commitments < 2 {
            return Err(err("projection.cache_commitments", "must be >= 2"));
        }
        if self.projection.cache_runs < 2 {
            return Err(err("projection.cache_runs", "must be >= 2"));
        }
        self.storage.validate()?;
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.parties.iter().enumerate() {
            check_name(&format!("parties[{i}].name"), &p.name)?;
            // The node's own parties: the Work service, the envelope service and the operator
            // write records no configured party may write (issue 27: ticks and votes are the
            // node's own), so a party may not take their names.
            if crate::ident::RESERVED_PARTIES.contains(&p.name.as_str()) {
                return Err(err(
                    format!("parties[{i}].name"),
                    format!("{:?} is reserved for the node's own records", p.name),
                ));
            }
            if !seen.insert(&p.name) {
                return Err(err(
                    format!("parties[{i}].name"),
                    format!("duplicate party {:?}", p.name),
                ));
            }
            for (j, v) in p.vkeys.iter().enumerate() {
                accord_proto::note::Verifier::from_vkey(v)
                    .map_err(|e| err(format!("parties[{i}].vkeys[{j}]"), e.to_string()))?;
            }
            if let Some(t) = &p.token_sha256 {
                check_sha256_hex(&format!("parties[{i}].token_sha256"), t)?;
            }
        }
        if let Some(t) = &self.admin.token_sha256 {
            check_sha256_hex("admin.token_sha256", t)?;
        }
        self.check_cert_hashes()?;
        if self.limits.max_batch_records == 0 {
            return Err(err("limits.max_batch_records", "must be > 0"));
        }
        if self.limits.list_streams == 0 {
            return Err(err("limits.list_streams", "must be > 0"));
        }
        let l = &self.limits;
        if l.streams_per_party
            .is_some_and(|n| n == 0 || n > l.list_streams)
        {
            return Err(err(
                "limits.streams_per_party",
                format!(
                    "must be between 1 and limits.list_streams ({})",
                    l.list_streams
                ),
            ));
        }
        if l.operator_stream_reserve
            .is_some_and(|n| n >= l.list_streams)
        {
            return Err(err(
                "limits.operator_stream_reserve",
                format!("must be below limits.list_streams ({})", l.list_streams),
            ));
        }
        for (field, list) in [
            (
                "authorities.administrative_close",
                &self.authorities.administrative_close,
            ),
            ("authorities.principals", &self.authorities.principals),
        ] {
            for (i, p) in list.iter().enumerate() {
                parse_party(p).map_err(|r| err(format!("{field}[{i}]"), r))?;
            }
        }
        for (i, q) in self.authorities.queue_owners.iter().enumerate() {
            let field = format!("authorities.queue_owners[{i}]");
            let (p, queue) = q
                .split_once(':')
                .ok_or_else(|| err(&field, format!("{q:?}: expected \"org/name:queue\"")))?;
            parse_party(p).map_err(|r| err(&field, r))?;
            crate::ident::name(queue).map_err(|r| err(&field, format!("queue: {r}")))?;
        }
        for (i, q) in self.authorities.observers.iter().enumerate() {
            let field = format!("authorities.observers[{i}]");
            let (p, org) = q
                .split_once(':')
                .ok_or_else(|| err(&field, format!("{q:?}: expected \"org/name:organisation\"")))?;
            parse_party(p).map_err(|r| err(&field, r))?;
            crate::ident::name(org).map_err(|r| err(&field, format!("organisation: {r}")))?;
        }
        if self.witnesses.k > self.witnesses.list.len() {
            return Err(err(
                "witnesses.k",
                format!(
                    "k = {} but only {} witnesses are listed",
                    self.witnesses.k,
                    self.witnesses.list.len()
                ),
            ));
        }
        for (i, w) in self.witnesses.list.iter().enumerate() {
            let v = accord_proto::note::Verifier::from_vkey(&w.vkey)
                .map_err(|e| err(format!("witnesses.list[{i}].vkey"), e.to_string()))?;
            if !v.kind().is_cosignature() {
                return Err(err(
                    format!("witnesses.list[{i}].vkey"),
                    "not a witness cosigner key (type 0x04 Ed25519 or 0x06 ML-DSA-44)",
                ));
            }
            check_endpoint(&format!("witnesses.list[{i}].endpoint"), &w.endpoint)?;
            if let Some(ca) = &w.ca
                && !ca.is_file()
            {
                return Err(err(
                    format!("witnesses.list[{i}].ca"),
                    format!("file not found: {}", ca.display()),
                ));
            }
        }
        self.limits.validate()?;
        envelope_types::validate(self)?;
        let f = &self.federation;
        for (field, v) in [
            ("federation.batch_size", f.batch_size as u64),
            ("federation.quarantine_timeout_ms", f.quarantine_timeout_ms),
            ("federation.retry_base_ms", f.retry_base_ms),
            ("federation.breaker_failures", u64::from(f.breaker_failures)),
            ("federation.receipt_poll_ms", f.receipt_poll_ms),
            ("federation.request_timeout_ms", f.request_timeout_ms),
            ("federation.outbox_max", f.outbox_max),
            ("federation.backfill_per_second", f.backfill_per_second),
            ("federation.max_in_flight", f.max_in_flight as u64),
            ("federation.clock_skew_ms", f.clock_skew_ms),
        ] {
            if v == 0 {
                return Err(err(field, "must be > 0"));
            }
        }
        if f.clock_skew_ms > MAX_CLOCK_SKEW_MS {
            return Err(err(
                "federation.clock_skew_ms",
                format!("must be at most {MAX_CLOCK_SKEW_MS} (10 minutes)"),
            ));
        }
        if f.retry_max_ms < f.retry_base_ms {
            return Err(err(
                "federation.retry_max_ms",
                "must be >= federation.retry_base_ms",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.peers.iter().enumerate() {
            check_name(&format!("peers[{i}].name"), &p.name)?;
            if p.name == self.name || !seen.insert(&p.name) {
                return Err(err(
                    format!("peers[{i}].name"),
                    format!("duplicate organisation {:?}", p.name),
                ));
            }
            crate::ident::endpoints(&p.endpoint)
                .map_err(|r| err(format!("peers[{i}].endpoint"), r))?;
            if p.vkeys.is_empty() {
                return Err(err(
                    format!("peers[{i}].vkeys"),
                    "at least one key is required",
                ));
            }
            for (j, v) in p.vkeys.iter().enumerate() {
                accord_proto::note::Verifier::from_vkey(v)
                    .map_err(|e| err(format!("peers[{i}].vkeys[{j}]"), e.to_string()))?;
            }
            if !p.ca.is_file() {
                return Err(err(
                    format!("peers[{i}].ca"),
                    format!("file not found: {}", p.ca.display()),
                ));
            }
            let pin = p.pin_sha256.trim();
            if !pin.is_empty() && (pin.len() != 64 || hex::decode(pin).is_err()) {
                return Err(err(
                    format!("peers[{i}].pin_sha256"),
                    "expected 64 hex digits: the SHA-256 of the peer's DER leaf certificate",
                ));
            }
        }
        Ok(())
    }

    /// Client-certificate hashes: each well-formed, and each mapped to one identity only.
    fn check_cert_hashes(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashMap::new();
        let lists = self
            .parties
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("parties[{i}].cert_sha256"), &p.cert_sha256))
            .chain([("admin.cert_sha256".to_string(), &self.admin.cert_sha256)]);
        for (field, list) in lists {
            for (j, h) in list.iter().enumerate() {
                let f = format!("{field}[{j}]");
                match hex::decode(h) {
                    Ok(b) if b.len() == 32 => {}
                    _ => {
                        return Err(err(
                            f,
                            "must be 64 hex digits (SHA-256 of the certificate's DER)",
                        ));
                    }
                }
                if let Some(first) = seen.insert(h.to_ascii_lowercase(), f.clone()) {
                    return Err(err(f, format!("the same certificate is already {first}")));
                }
            }
        }
        Ok(())
    }
}
