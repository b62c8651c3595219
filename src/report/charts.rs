//! SVG charts for reports (plotters' SVG backend): grouped bars and lines.

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// One named series: a value per category (`None` where it has none).
pub type Series = (String, Vec<Option<f64>>);

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// Grouped bars: categories along x (labelled 1..N, explained in the
/// report), one colour per series.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    n_categories: usize,
    series: &[Series],
) -> Result<()> {
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0f64, |a, &b| a.max(b))
        .max(1e-9)
        * 1.15;
    let width = (160 + n_categories * (14 * series.len().max(1) + 10)).clamp(640, 2400) as u32;
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n_categories as f64, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n_categories.min(60))
        .x_label_formatter(&|x| format!("{}", x.floor() as usize + 1))
        .x_desc("row of the table")
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    let w = 0.8 / series.len().max(1) as f64;
    for (si, (name, vals)) in series.iter().enumerate() {
        let color = Palette99::pick(si).mix(0.9);
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(i, v)| {
                v.map(|v| {
                    let x0 = i as f64 + 0.1 + si as f64 * w;
                    Rectangle::new([(x0, 0.0), (x0 + w, v)], color.filled())
                })
            }))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Lines through (x, y) points, one per series, e.g. speedup over threads
/// beside the ideal.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (xmax, ymax) = pts.fold((1f64, 1f64), |(a, b), &(x, y)| (a.max(x), b.max(y)));
    let root = SVGBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..xmax * 1.05, 0f64..ymax * 1.15)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (si, (name, p)) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        chart
            .draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                p.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_files() {
        let dir = tempfile::tempdir().unwrap();
        let bars = dir.path().join("bars.svg");
        grouped_bars(
            &bars,
            "GFLOP/s",
            "GFLOP/s",
            3,
            &[
                ("a".into(), vec![Some(1.0), None, Some(3.0)]),
                ("b".into(), vec![Some(2.0), Some(2.5), Some(1.0)]),
            ],
        )
        .unwrap();
        let text = std::fs::read_to_string(&bars).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("<rect"),
            "{}",
            &text[..100]
        );
        let line = dir.path().join("l.svg");
        lines(
            &line,
            "scaling",
            "threads",
            "speedup",
            &[("ideal".into(), vec![(1.0, 1.0), (2.0, 2.0)])],
        )
        .unwrap();
        assert!(
            std::fs::read_to_string(&line)
                .unwrap()
                .contains("<polyline")
                || std::fs::read_to_string(&line).unwrap().contains("<path")
        );
    }
}
