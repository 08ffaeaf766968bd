// The rows a virtualized list draws: those in view, and a few around them.

export interface Window {
  /** First and last (exclusive) row drawn. */
  start: number;
  end: number;
  /** Pixels above the first row drawn. */
  offset: number;
  /** Pixels of the whole list. */
  height: number;
}

export function rowsInView(count: number, rowHeight: number, scrollTop: number, viewport: number, overscan = 8): Window {
  const height = count * rowHeight;
  if (count === 0 || rowHeight <= 0) return { start: 0, end: 0, offset: 0, height: 0 };
  const top = Math.min(Math.max(0, scrollTop), Math.max(0, height - viewport));
  const first = Math.floor(top / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + Math.ceil(viewport / rowHeight) + 1 + overscan);
  return { start, end, offset: start * rowHeight, height };
}
