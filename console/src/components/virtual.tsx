import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

import { rowsInView } from "../window.js";

/**
 * A list that draws only the rows in view: ten thousand rows cost what thirty do. Rows are keyed by their item's
 * id, so a row's elements follow their item when the list changes under the pointer (a job arriving above it, one
 * deleted): what is hovered, focused or being clicked stays the same job.
 */
export function VirtualRows<T>(props: {
  items: T[];
  id: (item: T) => string;
  rowHeight: number;
  row: (item: T, index: number) => ComponentChildren;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [view, setView] = useState({ top: 0, height: 600 });
  useEffect(() => {
    const el = box.current!;
    let frame = 0;
    const measure = () => {
      frame = 0;
      setView({ top: el.scrollTop, height: el.clientHeight });
    };
    const onScroll = () => {
      if (!frame) frame = requestAnimationFrame(measure);
    };
    measure();
    el.addEventListener("scroll", onScroll, { passive: true });
    const ro = new ResizeObserver(onScroll);
    ro.observe(el);
    return () => {
      el.removeEventListener("scroll", onScroll);
      ro.disconnect();
      cancelAnimationFrame(frame);
    };
  }, []);
  const w = rowsInView(props.items.length, props.rowHeight, view.top, view.height);
  const rows = [];
  for (let i = w.start; i < w.end; i++) {
    rows.push(
      <div role="row" aria-rowindex={i + 2} class="row" style={{ top: `${i * props.rowHeight}px`, height: `${props.rowHeight}px` }} key={props.id(props.items[i])}>
        {props.row(props.items[i], i)}
      </div>,
    );
  }
  return (
    <div ref={box} class="scroller" role="rowgroup" aria-label={props.label} tabIndex={0}>
      <div class="spacer" style={{ height: `${w.height}px` }}>
        {rows}
      </div>
    </div>
  );
}
