// Sale page: what an admitted visitor sees behind the gate. Shows what is
// left (a seat map or a quantity), holds a choice for a few minutes, counts
// the hold down, and confirms it into a numbered ticket. This file finds the
// page's elements, builds the `app` object the sale-*.js modules share
// (state, elements, API, seat map, quantity picker, countdown, refresh) and
// wires the buttons.
import { $ } from './lib-dom.js';
import { createState } from './sale-state.js';
import { createSaleApi } from './sale-api.js';
import { createSeatMap } from './sale-seats.js';
import { createQuantityPicker } from './sale-quantity.js';
import { createCountdown } from './sale-countdown.js';
import { createRefresher } from './sale-refresh.js';
import { chooseMore } from './sale-flow.js';
import { hold, confirmHold, releaseHold } from './sale-actions.js';

const room = document.body.getAttribute('data-room') || '';

const app = {
  st: createState(),
  el: {
    heading: $('sale-heading'),
    message: $('sale-message'),
    back: $('back-to-room'),
    choose: $('choose-panel'),
    chooseTitle: $('choose-title'),
    stockLeft: $('stock-left'),
    stockLeftLabel: $('stock-left-label'),
    limitNote: $('limit-note'),
    seatPicker: $('seat-picker'),
    seatMap: $('seat-map'),
    legendMine: $('legend-mine'),
    selection: $('selection'),
    stockPicker: $('stock-picker'),
    quantity: $('quantity'),
    hold: $('hold'),
    holdHint: $('hold-hint'),
    holdPanel: $('hold-panel'),
    heldWhat: $('held-what'),
    countdown: $('countdown'),
    confirm: $('confirm'),
    release: $('release'),
    ticket: $('ticket'),
    ticketSequence: $('ticket-sequence'),
    ticketWhat: $('ticket-what'),
    ticketWhen: $('ticket-when'),
    otherTickets: $('other-tickets'),
    buyMore: $('buy-more')
  },
  api: createSaleApi(room)
};
app.seats = createSeatMap(app);
app.quantity = createQuantityPicker(app);
app.countdown = createCountdown(app);
const refresher = createRefresher(app);
app.refreshSoon = refresher.soon;

if (app.el.hold) app.el.hold.addEventListener('click', () => hold(app));
if (app.el.confirm) app.el.confirm.addEventListener('click', () => confirmHold(app));
if (app.el.release) app.el.release.addEventListener('click', () => releaseHold(app));
if (app.el.buyMore) app.el.buyMore.addEventListener('click', () => chooseMore(app));
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && app.st.phase !== 'nopass') app.refreshSoon(0);
});

if (room) refresher.now();
