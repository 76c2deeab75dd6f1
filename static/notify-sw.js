// The waiting page's service worker, for "Notify me" (static/room-notify.js
// registers it, its scope every waiting page: /rooms/). A push is one of
// the room's events (api.md, "Step away: notifications"):
// {"id","type":"near"|"admitted","room","visitor","position","resume_url","at"}.
// It shows a notification ("Your turn is near", "It's your turn": the
// words come in this script's query, in the page's language) and, when it
// is clicked, brings the visitor back: to a tab of the room if one is open,
// else to the event's resume link, whose button gives the place to this
// browser. Open pages of the room are told too (a message
// {type: 'waitroom-push', event}), so they can check their place at once.

const words = new URL(self.location.href).searchParams;
const TEXTS = {
  near: { title: words.get('near') || 'Your turn is near', body: words.get('near_body') || '' },
  admitted: { title: words.get('admitted') || "It's your turn", body: words.get('admitted_body') || '' }
};

self.addEventListener('install', function () { self.skipWaiting(); });
self.addEventListener('activate', function (event) { event.waitUntil(self.clients.claim()); });

// An http(s) address, or null.
function link(url) {
  if (typeof url !== 'string' || !url) return null;
  try {
    const u = new URL(url, self.location.origin);
    return (u.protocol === 'https:' || u.protocol === 'http:') ? u.href : null;
  } catch (e) { return null; }
}

// The event a push carries, or null for one that is not ours.
function eventOf(data) {
  let event = null;
  try { event = data ? data.json() : null; } catch (e) { return null; }
  if (!event || typeof event !== 'object' || (event.type !== 'near' && event.type !== 'admitted')) return null;
  return event;
}

// The open windows of the room's waiting page.
function roomWindows(room) {
  const path = '/rooms/' + encodeURIComponent(room || '');
  return self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then(function (all) {
    return all.filter(function (c) {
      try { return new URL(c.url).pathname === path; } catch (e) { return false; }
    });
  });
}

self.addEventListener('push', function (event) {
  const got = eventOf(event.data);
  // userVisibleOnly: every push shows something, even one we cannot read.
  const kind = got ? got.type : 'near';
  const text = TEXTS[kind];
  const room = got && typeof got.room === 'string' ? got.room : '';
  const shown = self.registration.showNotification(text.title, {
    body: text.body,
    tag: 'waitroom:' + room,
    renotify: true,
    requireInteraction: kind === 'admitted',
    data: { url: link(got && got.resume_url), room: room, type: kind, id: got && got.id }
  });
  const told = roomWindows(room).then(function (windows) {
    windows.forEach(function (w) { w.postMessage({ type: 'waitroom-push', event: kind, room: room }); });
  });
  event.waitUntil(Promise.all([shown, told]));
});

self.addEventListener('notificationclick', function (event) {
  event.notification.close();
  const data = event.notification.data || {};
  function open() { return data.url ? self.clients.openWindow(data.url) : null; }
  event.waitUntil(roomWindows(data.room).then(function (windows) {
    // A tab of the room holds the place already: back to it.
    const tab = windows.find(function (w) { return 'focus' in w; });
    return tab ? tab.focus().catch(open) : open();
  }));
});
