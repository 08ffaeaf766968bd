import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

/** One metric's curve against the step (or the time, for reports without one). Drag to zoom, double-click to reset. */
export function MetricChart(props: { name: string; xs: number[]; ys: number[]; byStep: boolean }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current!;
    const css = getComputedStyle(document.documentElement);
    const stroke = css.getPropertyValue("--accent").trim() || "#2563eb";
    const axis = { stroke: css.getPropertyValue("--fg-muted").trim() || "#666", grid: { stroke: css.getPropertyValue("--line").trim() || "#ddd" } };
    const opts: uPlot.Options = {
      title: props.name,
      width: Math.max(280, el.clientWidth),
      height: 220,
      scales: { x: { time: !props.byStep } },
      axes: [axis, axis],
      series: [{ label: props.byStep ? "step" : "time" }, { label: props.name, stroke, width: 2, points: { show: false } }],
      cursor: { drag: { x: true, y: false } },
      legend: { show: true },
    };
    plot.current = new uPlot(opts, [props.xs, props.ys], el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(280, el.clientWidth), height: 220 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [props.name, props.byStep]);
  useEffect(() => {
    plot.current?.setData([props.xs, props.ys]);
  }, [props.xs, props.ys]);
  return <figure class="chart" ref={box} aria-label={`${props.name} over ${props.byStep ? "steps" : "time"}`} data-metric={props.name} data-points={props.xs.length} />;
}
