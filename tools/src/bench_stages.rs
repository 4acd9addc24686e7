//! Where an append's time goes, from the node's own `accord_append_stage_seconds` histograms
//! (issue 14): `accordctl bench append` scrapes the child node's metrics listener before and
//! after a phase and reports, per stage, how many observations the phase added and their
//! p50/p99 (the upper bound of the bucket that holds the quantile) and mean.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SERIES: &str = "accord_append_stage_seconds";

/// One stage's histogram: cumulative counts per upper bound (seconds), the sum and the count.
#[derive(Debug, Clone, Default)]
pub struct Stage {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

/// Every stage, by name.
pub type Stages = BTreeMap<String, Stage>;

/// `GET /metrics` from the node's metrics listener (plain HTTP/1.0), parsed.
pub async fn scrape(addr: SocketAddr) -> Result<Stages> {
    let mut c = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("metrics listener {addr}"))?;
    c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut body = String::new();
    c.read_to_string(&mut body).await?;
    Ok(parse(&body))
}

/// The stage series of a Prometheus text exposition.
pub fn parse(text: &str) -> Stages {
    let mut out = Stages::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(SERIES) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
            let end = labels[start..].find('"')? + start;
            Some(labels[start..end].to_string())
        };
        let Some(stage) = label("stage") else {
            continue;
        };
        let s = out.entry(stage).or_default();
        if labels.starts_with("_bucket") {
            let le = match label("le").as_deref() {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().unwrap_or(f64::INFINITY),
                None => continue,
            };
            s.buckets.push((le, value));
        } else if labels.starts_with("_sum") {
            s.sum = value;
        } else if labels.starts_with("_count") {
            s.count = value;
        }
    }
    out
}

/// What `after` added over `before`, per stage, as JSON: `{stage: {count, p50_ms, p99_ms,
/// mean_ms, max_ms}}` (stages with no new observation left out).
pub fn delta_json(before: &Stages, after: &Stages) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (name, a) in after {
        let empty = Stage::default();
        let b = before.get(name).unwrap_or(&empty);
        let count = a.count - b.count;
        if count <= 0.0 {
            continue;
        }
        let buckets: Vec<(f64, f64)> = a
            .buckets
            .iter()
            .map(|(le, n)| {
                let was = b
                    .buckets
                    .iter()
                    .find(|(l, _)| l == le)
                    .map_or(0.0, |(_, n)| *n);
                (*le, n - was)
            })
            .collect();
        let q = |q: f64| {
            buckets
                .iter()
                .find(|(_, n)| *n >= q * count)
                .map_or(f64::INFINITY, |(le, _)| *le)
        };
        let ms = |s: f64| if s.is_finite() { s * 1000.0 } else { -1.0 };
        // The bound of the highest bucket the phase reached: one slow group commit holds up
        // every append queued behind it, yet is one observation among thousands.
        let max = buckets
            .iter()
            .find(|(_, n)| *n >= count)
            .map_or(f64::INFINITY, |(le, _)| *le);
        out.insert(
            name.clone(),
            serde_json::json!({
                "count": count,
                "p50_ms": ms(q(0.5)),
                "p99_ms": ms(q(0.99)),
                "mean_ms": ms((a.sum - b.sum) / count),
                "max_ms": ms(max),
            }),
        );
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_quantiles_come_from_the_phase_only() {
        let before = parse(
            "accord_append_stage_seconds_bucket{stage=\"sync\",le=\"0.001\"} 10\n\
             accord_append_stage_seconds_bucket{stage=\"sync\",le=\"0.01\"} 10\n\
             accord_append_stage_seconds_bucket{stage=\"sync\",le=\"+Inf\"} 10\n\
             accord_append_stage_seconds_sum{stage=\"sync\"} 0.005\n\
             accord_append_stage_seconds_count{stage=\"sync\"} 10\n",
        );
        let after = parse(
            "# HELP accord_append_stage_seconds x\n\
             accord_append_stage_seconds_bucket{stage=\"sync\",le=\"0.001\"} 108\n\
             accord_append_stage_seconds_bucket{stage=\"sync\",le=\"0.01\"} 110\n\
             accord_append_stage_seconds_bucket{stage=\"sync\",le=\"+Inf\"} 110\n\
             accord_append_stage_seconds_sum{stage=\"sync\"} 0.105\n\
             accord_append_stage_seconds_count{stage=\"sync\"} 110\n\
             accord_append_stage_seconds_count{stage=\"verify\"} 0\n",
        );
        let d = delta_json(&before, &after);
        let sync = &d["sync"];
        assert_eq!(sync["count"], 100.0);
        assert_eq!(sync["p50_ms"], 1.0);
        // 98 of the 100 new ones are under 1 ms: the 99th is in the 10 ms bucket.
        assert_eq!(sync["p99_ms"], 10.0);
        assert_eq!(sync["max_ms"], 10.0);
        assert!((sync["mean_ms"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!(d.get("verify").is_none());
    }
}
