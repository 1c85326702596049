//! `probelint simulate --svg FILE`: the timeline as a picture, drawn with plotters' SVG backend.
//! One column per variant (as written, as mutated): probe results, container runs and restarts,
//! Ready periods, the time the pod was Ready with its model still loading (requests fail), and,
//! for a rollout or drain, the serving capacity below.

use plotters::prelude::*;
use probelint_policies::ProbeKind;
use probelint_policies::simulate::Outcome;
use probelint_policies::simulate::fleet::FleetOutcome;

/// One column of the picture.
pub struct Panel<'a> {
    pub title: String,
    pub outcome: &'a Outcome,
    pub fleet: Option<&'a FleetOutcome>,
    /// Whether the outcome knows when the model was loaded (a measurement from outside the
    /// server does not): without it, the "model loaded" and "traffic fails" rows stay empty.
    pub knows_load: bool,
}

const ROWS: [&str; 6] = [
    "traffic fails",
    "Ready",
    "container",
    "liveness",
    "readiness",
    "startup",
];

fn row_of(kind: ProbeKind) -> f64 {
    match kind {
        ProbeKind::Liveness => 3.0,
        ProbeKind::Readiness => 4.0,
        ProbeKind::Startup => 5.0,
    }
}

/// What plotters' SVG backend reports when it cannot draw.
type Plot = DrawingAreaErrorKind<std::io::Error>;

/// Why a picture could not be drawn: which part failed, and plotters' reason (all a user reads,
/// after `cannot draw the timeline: `).
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    /// Filling the picture's background.
    #[error("{0}")]
    Background(Plot),
    /// A column's timeline chart (probe results, container runs, Ready).
    #[error("{0}")]
    Timeline(Plot),
    /// A column's serving-capacity chart (rollouts and drains).
    #[error("{0}")]
    Capacity(Plot),
    /// One workload's block of lanes in the audit's picture.
    #[error("{0}")]
    Block(Plot),
    /// Finishing the SVG document.
    #[error("{0}")]
    Present(Plot),
}

fn band(row: f64, from: f64, to: f64, color: RGBColor) -> Rectangle<(f64, f64)> {
    Rectangle::new([(from, row + 0.15), (to, row + 0.85)], color.filled())
}

/// Renders the panels to an SVG document.
pub fn render(panels: &[Panel<'_>], duration: f64) -> Result<String, DrawError> {
    let fleet = panels.iter().any(|p| p.fleet.is_some());
    let width = 640 * panels.len().max(1) as u32;
    let height = if fleet { 620 } else { 360 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(DrawError::Background)?;
        let columns = root.split_evenly((1, panels.len().max(1)));
        for (panel, area) in panels.iter().zip(columns) {
            let (top, bottom) = if fleet {
                area.split_vertically(360)
            } else {
                (area.clone(), area.clone())
            };
            timeline(&top, panel, duration).map_err(DrawError::Timeline)?;
            if let Some(f) = panel.fleet {
                capacity(&bottom, f, duration).map_err(DrawError::Capacity)?;
            }
        }
        root.present().map_err(DrawError::Present)?;
    }
    Ok(svg)
}

type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// The series labels of a chart, drawn the same way on every picture.
fn draw_legend<'b>(
    chart: &mut ChartContext<
        'b,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    position: SeriesLabelPosition,
) -> Result<(), Plot> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 10))
        .draw()
}

fn timeline(area: &Area<'_>, panel: &Panel<'_>, duration: f64) -> Result<(), Plot> {
    let o = panel.outcome;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..duration, 0f64..6.9f64)?;
    // Labels every half row: the row names sit at the half-rows (the rows' middles).
    let row_name = |y: &f64| {
        let k = (y - 0.5).round();
        if (y - 0.5 - k).abs() < 1e-6 && (0.0..6.0).contains(&k) {
            ROWS[k as usize].to_owned()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(14)
        .y_label_formatter(&row_name)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("seconds since the pod's start")
        .draw()?;
    let grey = RGBColor(200, 200, 200);
    let blue = RGBColor(70, 130, 180);
    let green = RGBColor(60, 170, 90);
    let red = RGBColor(210, 50, 50);
    chart
        .draw_series(o.trace.running.iter().map(|(a, b)| band(2.0, *a, *b, grey)))?
        .label("container running")
        .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], grey.filled()));
    chart
        .draw_series(
            o.trace
                .loaded
                .iter()
                .map(|(a, b)| Rectangle::new([(*a, 2.35), (*b, 2.65)], blue.filled())),
        )?
        .label("model loaded")
        .legend(move |(x, y)| Rectangle::new([(x, y - 2), (x + 12, y + 2)], blue.filled()));
    chart
        .draw_series(o.trace.ready.iter().map(|(a, b)| band(1.0, *a, *b, green)))?
        .label("Ready")
        .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], green.filled()));
    // Ready while the model loads: every request routed to the pod then fails.
    let failing: Vec<(f64, f64)> = if !panel.knows_load {
        Vec::new()
    } else {
        o.trace
            .ready
            .iter()
            .flat_map(|(from, to)| {
                let mut cuts = Vec::new();
                let mut t = *from;
                for (a, b) in &o.trace.loaded {
                    if *b <= t || *a >= *to {
                        continue;
                    }
                    if *a > t {
                        cuts.push((t, a.min(*to)));
                    }
                    t = t.max(*b);
                }
                if t < *to && !o.trace.loaded.iter().any(|(a, b)| *a <= t && t < *b) {
                    cuts.push((t, *to));
                }
                cuts
            })
            .filter(|(a, b)| b > a)
            .collect()
    };
    chart
        .draw_series(failing.iter().map(|(a, b)| band(0.0, *a, *b, red)))?
        .label("Ready before loaded: requests fail")
        .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], red.filled()));
    chart
        .draw_series(
            o.trace
                .checks
                .iter()
                .filter(|c| c.ok)
                .map(|c| Circle::new((c.end, row_of(c.probe) + 0.5), 2, green.filled())),
        )?
        .label("probe success")
        .legend(move |(x, y)| Circle::new((x + 6, y), 3, green.filled()));
    chart
        .draw_series(
            o.trace
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| Circle::new((c.end, row_of(c.probe) + 0.5), 2, red.filled())),
        )?
        .label("probe failure")
        .legend(move |(x, y)| Circle::new((x + 6, y), 3, red.filled()));
    chart
        .draw_series(
            o.trace
                .kills
                .iter()
                .map(|(t, _)| PathElement::new(vec![(*t, 2.0), (*t, 6.0)], red.stroke_width(1))),
        )?
        .label("killed")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], red.stroke_width(2)));
    chart
        .draw_series(
            o.trace
                .restarts
                .iter()
                .map(|t| TriangleMarker::new((*t, 2.5), 5, BLACK.filled())),
        )?
        .label("restart")
        .legend(|(x, y)| TriangleMarker::new((x + 6, y), 4, BLACK.filled()));
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(())
}

fn capacity(area: &Area<'_>, f: &FleetOutcome, duration: f64) -> Result<(), Plot> {
    let end = f
        .done_seconds
        .map_or(duration, |d| (d * 1.1).max(d + 60.0))
        .max(1.0);
    let top = f
        .points
        .iter()
        .map(|p| p.old + p.new)
        .max()
        .unwrap_or(f.replicas)
        .max(f.replicas) as f64
        + 1.0;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{}: pods serving", f.scenario), ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(30)
        .build_cartesian_2d(0f64..end, 0f64..top)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .x_desc("seconds since the rollout or drain began")
        .draw()?;
    let step = |value: fn(&probelint_policies::simulate::fleet::Point) -> u32| {
        let mut pts = Vec::new();
        for (i, p) in f.points.iter().enumerate() {
            if i > 0 {
                pts.push((p.t, f64::from(value(&f.points[i - 1]))));
            }
            pts.push((p.t, f64::from(value(p))));
        }
        if let Some(p) = f.points.last() {
            pts.push((end, f64::from(value(p))));
        }
        pts
    };
    let blue = RGBColor(70, 130, 180);
    let green = RGBColor(60, 170, 90);
    chart
        .draw_series(LineSeries::new(step(|p| p.available), blue.stroke_width(2)))?
        .label("available (as the controller counts)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], blue.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(step(|p| p.serving), green.stroke_width(2)))?
        .label("serving (Ready and loaded)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], green.stroke_width(2)));
    let grey = RGBColor(150, 150, 150);
    chart
        .draw_series(LineSeries::new(
            step(|p| p.old + p.new),
            grey.stroke_width(1),
        ))?
        .label("pods (old + new)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], grey.stroke_width(1)));
    chart
        .draw_series(LineSeries::new(
            vec![(0.0, f64::from(f.replicas)), (end, f64::from(f.replicas))],
            BLACK.mix(0.4),
        ))?
        .label("replicas")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.mix(0.4)));
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    Ok(())
}

/// One row of a timeline picture: a pod as the API saw it, or a prediction, drawn alike.
pub struct Lane<'a> {
    pub label: String,
    /// A prediction: drawn paler, so that it reads as what was expected, not what happened.
    pub predicted: bool,
    pub spans: &'a [crate::audit::timeline::Span],
    pub marks: &'a [crate::audit::timeline::Mark],
}

/// The lanes of one workload, on one time axis from 0 to `end` seconds.
pub struct Block<'a> {
    pub title: String,
    pub end: f64,
    pub lanes: Vec<Lane<'a>>,
}

const LANE_PIXELS: u32 = 34;
const BLOCK_PIXELS: u32 = 90;

/// Renders the blocks, one under the other, to an SVG document: observed pods and predictions
/// as rows of the same drawing (container runs, Ready, waiting for a node, image pulls, probe
/// failures, probe kills, starts).
pub fn lanes(blocks: &[Block<'_>]) -> Result<String, DrawError> {
    let heights: Vec<u32> = blocks
        .iter()
        .map(|b| BLOCK_PIXELS + LANE_PIXELS * b.lanes.len().max(1) as u32)
        .collect();
    let width = 1100;
    let height = heights.iter().sum::<u32>().max(BLOCK_PIXELS);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(DrawError::Background)?;
        let mut rest = root.clone();
        for (i, (block, h)) in blocks.iter().zip(&heights).enumerate() {
            let (area, below) = rest.split_vertically(*h);
            block_chart(&area, block, i == 0).map_err(DrawError::Block)?;
            rest = below;
        }
        root.present().map_err(DrawError::Present)?;
    }
    Ok(svg)
}

fn block_chart(area: &Area<'_>, block: &Block<'_>, legend: bool) -> Result<(), Plot> {
    use crate::audit::timeline::{MarkKind, SpanKind};
    let n = block.lanes.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(&block.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(230)
        .build_cartesian_2d(0f64..block.end.max(1.0), 0f64..n as f64)?;
    let labels: Vec<String> = block.lanes.iter().map(|l| l.label.clone()).collect();
    let lane_name = move |y: &f64| {
        let k = (y - 0.5).round();
        if (y - 0.5 - k).abs() < 1e-6 && k >= 0.0 && (k as usize) < labels.len() {
            labels[labels.len() - 1 - k as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        // Step 0.5 exactly (the finest of plotters' 1-2-5 steps within the count): a label at
        // each lane's middle.
        .y_labels(2 * n + 2)
        .y_label_formatter(&lane_name)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("seconds since the workload's earliest record")
        .draw()?;
    let grey = RGBColor(200, 200, 200);
    let blue = RGBColor(70, 130, 180);
    let green = RGBColor(60, 170, 90);
    let red = RGBColor(210, 50, 50);
    let amber = RGBColor(230, 160, 40);
    let paler = |c: RGBColor, predicted: bool| if predicted { c.mix(0.45) } else { c.mix(1.0) };
    let base = |i: usize| (n - 1 - i) as f64;
    for (kind, color, low, high, label) in [
        (SpanKind::Unscheduled, amber, 0.4, 0.6, "waiting for a node"),
        (SpanKind::Pulling, blue, 0.4, 0.6, "pulling the image"),
        (SpanKind::Running, grey, 0.15, 0.55, "container running"),
        (SpanKind::Ready, green, 0.58, 0.85, "Ready"),
    ] {
        let rects: Vec<Rectangle<(f64, f64)>> = block
            .lanes
            .iter()
            .enumerate()
            .flat_map(|(i, l)| {
                let y = base(i);
                l.spans
                    .iter()
                    .filter(move |s| s.kind == kind)
                    .map(move |s| {
                        Rectangle::new(
                            [(s.from, y + low), (s.to.max(s.from), y + high)],
                            paler(color, l.predicted).filled(),
                        )
                    })
            })
            .collect();
        let series = chart.draw_series(rects)?;
        if legend {
            series.label(label).legend(move |(x, y)| {
                Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled())
            });
        }
    }
    let marks = |kind: MarkKind| {
        block.lanes.iter().enumerate().flat_map(move |(i, l)| {
            let y = base(i);
            l.marks
                .iter()
                .filter(move |m| m.kind == kind)
                .map(move |m| (m.t, y, l.predicted))
        })
    };
    let kills: Vec<PathElement<(f64, f64)>> = marks(MarkKind::ProbeKill)
        .map(|(t, y, p)| {
            PathElement::new(
                vec![(t, y + 0.05), (t, y + 0.95)],
                paler(red, p).stroke_width(2),
            )
        })
        .collect();
    let series = chart.draw_series(kills)?;
    if legend {
        series
            .label("killed by a probe")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], red.stroke_width(2)));
    }
    for (kind, color, at, label) in [
        (MarkKind::ProbeFailed, red, 0.3, "probe failed"),
        (MarkKind::Scheduled, blue, 0.5, "scheduled"),
        (MarkKind::WaitingToSchedule, amber, 0.5, "not schedulable"),
        (MarkKind::Ready, green, 0.72, "became Ready"),
        (MarkKind::NotReady, amber, 0.72, "no longer Ready"),
        (MarkKind::Terminated, BLACK, 0.35, "terminated"),
    ] {
        let dots: Vec<Circle<(f64, f64), i32>> = marks(kind)
            .map(|(t, y, p)| Circle::new((t, y + at), 3, paler(color, p).filled()))
            .collect();
        let series = chart.draw_series(dots)?;
        if legend {
            series
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 6, y), 3, color.filled()));
        }
    }
    let starts: Vec<TriangleMarker<(f64, f64), i32>> = marks(MarkKind::Started)
        .map(|(t, y, p)| TriangleMarker::new((t, y + 0.35), 5, paler(BLACK, p).filled()))
        .collect();
    let series = chart.draw_series(starts)?;
    if legend {
        series
            .label("container started")
            .legend(|(x, y)| TriangleMarker::new((x + 6, y), 4, BLACK.filled()));
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}
