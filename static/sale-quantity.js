// Sale page quantity picker (stock sales): offers 1 up to what the visitor
// may still take and what is left, keeps their choice when the range
// changes, and says how many they chose.
import { show } from './lib-dom.js';
import { canPick, stockLeft } from './sale-state.js';
import { render, showDefaultMessage } from './sale-view.js';

export function createQuantityPicker(app) {
  const { st, el } = app;

  function renderQuantity() {
    const max = Math.min(canPick(st), stockLeft(st));
    const sel = el.quantity;
    const was = parseInt(sel.value, 10);
    if (sel.options.length !== max) {
      sel.textContent = '';
      for (let i = 1; i <= max; i++) {
        const o = document.createElement('option');
        o.value = String(i);
        o.textContent = String(i);
        sel.appendChild(o);
      }
      if (max > 0) sel.value = String(isFinite(was) ? Math.min(Math.max(1, was), max) : 1);
    }
    sel.disabled = max === 0;
    show(el.stockPicker, max > 0);
  }

  if (el.quantity) {
    el.quantity.addEventListener('change', () => {
      st.pendingKey = null;
      render(app);
      showDefaultMessage(app);
    });
  }

  return {
    render: renderQuantity,
    // The chosen quantity, NaN when there is none.
    chosen: () => parseInt(el.quantity.value, 10)
  };
}
