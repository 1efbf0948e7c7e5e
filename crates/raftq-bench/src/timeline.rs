//! Every send of a fixed-rate row with its times: when it was meant to start, when a worker
//! started it and when the system confirmed it. `run` writes it to the results file beside the
//! row; `report` draws it as a latency-over-time plot ([`plot`]), so that a stall shows where it
//! happened, and `scripts/latency --tail` matches its slow sends with the servers' stage events.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// Pixels of a plot.
const PLOT_SIZE: (u32, u32) = (1000, 400);
/// The font family every text of a plot is drawn in (registered once, from [`dejavu`]).
const FONT: &str = "sans-serif";

/// The sends of one row, times in microseconds since the measured window opened.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub label: String,
    pub key: String,
    /// When the measured window opened, in nanoseconds since the Unix epoch: the servers' logs
    /// are stamped in that clock.
    pub start_unix_nanos: u64,
    /// Each send as `[intended, started, done]`.
    pub sends: Vec<[u64; 3]>,
}

impl Timeline {
    /// An empty timeline of the sends of a window that opened at `start`.
    pub fn starting(start: Instant) -> Timeline {
        Timeline {
            start_unix_nanos: unix_nanos(start),
            ..Timeline::default()
        }
    }

    /// Adds a send meant to start at `intended`, started at `started` and confirmed at `done`,
    /// all inside or after the window that `origin` opened.
    pub fn push(&mut self, origin: Instant, [intended, started, done]: [Instant; 3]) {
        let micros = |t: Instant| {
            u64::try_from(t.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX)
        };
        self.sends
            .push([micros(intended), micros(started), micros(done)]);
    }

    /// The sends in the order they were meant to start, as (seconds into the window, latency
    /// from the intended time in ms).
    pub fn latencies(&self) -> Vec<(f64, f64)> {
        let mut points: Vec<(f64, f64)> = self
            .sends
            .iter()
            .map(|[intended, _, done]| {
                (
                    *intended as f64 / 1e6,
                    done.saturating_sub(*intended) as f64 / 1e3,
                )
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points
    }

    /// Draws every send's latency against its intended time as a PNG at `path`, titled with
    /// `title` and with a line at the row's p99 (`p99_ms`, from its histogram).
    pub fn plot(&self, path: &Path, title: &str, p99_ms: Option<f64>) -> Result<()> {
        register_font();
        let points = self.latencies();
        let seconds = points.last().map_or(1.0, |p| p.0).max(1.0);
        let top = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.05;
        let root = BitMapBackend::new(path, PLOT_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..seconds, 0.0..top)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc("intended send time, seconds into the measured window")
            .y_desc("latency from the intended time, ms")
            .label_style((FONT, 12))
            .draw()
            .map_err(drawing)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 1, BLUE.mix(0.6).filled())),
            )
            .map_err(drawing)?;
        if let Some(p99_ms) = p99_ms {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, p99_ms), (seconds, p99_ms)],
                    RED.stroke_width(1),
                ))
                .map_err(drawing)?
                .label(format!("p99 {p99_ms:.2} ms"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED));
            chart
                .configure_series_labels()
                .label_font((FONT, 12))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(drawing)?;
        }
        root.present()
            .map_err(drawing)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// Nanoseconds from the Unix epoch to `t`, through the wall clock read now.
pub fn unix_nanos(t: Instant) -> u64 {
    let now = Instant::now();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let at = if t <= now {
        wall.saturating_sub(now - t)
    } else {
        wall + (t - now)
    };
    u64::try_from(at.as_nanos()).unwrap_or(u64::MAX)
}

/// Registers [`FONT`] with plotters, once: it draws text only in fonts registered with it.
fn register_font() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // DejaVu Sans is a valid font: registering it cannot fail.
        let _ = plotters::style::register_font(
            FONT,
            plotters::style::FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

fn drawing<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("drawing the plot: {error:?}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timeline() -> (Timeline, Instant) {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let mut t = Timeline::default();
        // A send that waited 5 ms for a worker and took 2, then one that took 1 ms, pushed out of
        // order as two workers finish them.
        t.push(origin, [at(10), at(15), at(17)]);
        t.push(origin, [at(0), at(0), at(1)]);
        (t, origin)
    }

    #[test]
    fn latencies_count_from_the_intended_time_in_intended_order() {
        let (t, _) = timeline();
        assert_eq!(t.sends, [[10_000, 15_000, 17_000], [0, 0, 1_000]]);
        assert_eq!(t.latencies(), [(0.0, 1.0), (0.01, 7.0)]);
    }

    #[test]
    fn the_plot_is_a_png_of_its_size() {
        let (t, _) = timeline();
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plot.png");
        t.plot(&path, "raftq-3: a fixed 1000/s", Some(7.0))
            .expect("plot");
        let png = std::fs::read(&path).expect("read");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // The IHDR chunk: its width and height, big-endian.
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().expect("4")), 1000);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().expect("4")), 400);
        // A plot of no sends still draws its axes.
        Timeline::default()
            .plot(&path, "nothing", None)
            .expect("an empty plot");
    }

    #[test]
    fn unix_times_keep_the_distance_between_instants() {
        let now = Instant::now();
        let later = now + Duration::from_millis(250);
        let (a, b) = (unix_nanos(now), unix_nanos(later));
        let apart = b - a;
        assert!(
            (249_000_000..=251_000_000).contains(&apart),
            "{apart} ns apart"
        );
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64;
        assert!(a.abs_diff(wall) < 1_000_000_000);
    }
}
