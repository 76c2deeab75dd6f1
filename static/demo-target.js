// The demo's protected page. The pass came in the address (`?wr_pass=…`,
// the waiting room's redirect) and the server has read it: take it out of
// the address bar and this history entry, so it is not bookmarked, shared,
// synced or shown over a shoulder. (A reload still verifies: the waiting
// room set the HttpOnly `wr_pass` cookie too.)
const url = new URL(location.href);
if (url.searchParams.has('wr_pass')) {
  url.searchParams.delete('wr_pass');
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
}
