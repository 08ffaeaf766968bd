import { useEffect, useRef } from "preact/hooks";

/** A modal question; Escape or Cancel says no. */
export function Confirm(props: { open: boolean; title: string; body: string; action: string; danger?: boolean; onAnswer: (yes: boolean) => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={() => props.onAnswer(false)}>
      <h2 id="confirm-title">{props.title}</h2>
      <p>{props.body}</p>
      <div class="actions">
        <button type="button" class="quiet" onClick={() => props.onAnswer(false)}>
          Cancel
        </button>
        <button type="button" data-confirm class={props.danger ? "danger" : ""} onClick={() => props.onAnswer(true)}>
          {props.action}
        </button>
      </div>
    </dialog>
  );
}
