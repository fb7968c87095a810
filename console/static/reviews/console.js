/* Breakpoint Manager console: keep the page current without a reload.
 *
 * Every few seconds (meta bpm-poll-ms) the page fetches its own URL, query string
 * included, so the reviewer's filters, search and sort stay as they are, and swaps in
 * the fresh copy of each element marked [data-bpm-refresh] (by id). It pauses while
 * the tab is hidden, while rows are selected for an action, and while the reviewer is
 * typing inside a refreshed region. On a review screen, a status change made elsewhere
 * shows a notice instead of silently replacing the decision form.
 */
'use strict';
(function () {
  const meta = document.querySelector('meta[name="bpm-poll-ms"]');
  const interval = meta ? parseInt(meta.content, 10) : 0;
  if (!interval || interval < 1000 || !window.fetch || !window.DOMParser) {
    return;
  }
  let inFlight = false;

  function regions() {
    return Array.from(document.querySelectorAll('[data-bpm-refresh][id]'));
  }

  function reviewerIsBusy() {
    if (document.querySelector('input.action-select:checked, #action-toggle:checked')) {
      return true;
    }
    const action = document.querySelector('select[name="action"]');
    if (action && action.value) {
      return true;
    }
    const active = document.activeElement;
    return Boolean(
      active && active.matches('input, textarea, select') && active.closest('[data-bpm-refresh]')
    );
  }

  function rebindAdminActions() {
    // Django's actions.js binds to the checkboxes and action bar it found at load time;
    // both were just replaced (together, so the "N selected" counter stays right).
    const boxes = document.querySelectorAll('tr input.action-select');
    if (boxes.length && typeof window.Actions === 'function') {
      window.Actions(boxes);
    }
  }

  function keepDetailsState(oldEl, newEl) {
    // A <details> the reviewer opened (or closed) stays so when its region is refreshed.
    oldEl.querySelectorAll('details[id]').forEach(function (details) {
      const twin = newEl.querySelector('#' + CSS.escape(details.id));
      if (twin) {
        twin.open = details.open;
      }
    });
  }

  function noticeStatusChange(freshDoc) {
    const head = document.querySelector('[data-bpm-status]');
    const stale = document.getElementById('bpm-stale');
    if (!head || !stale) {
      return;
    }
    const initial = stale.dataset.initialStatus;
    const fresh = freshDoc.querySelector('[data-bpm-status]');
    const now = fresh ? fresh.getAttribute('data-bpm-status') : null;
    if (now && initial && now !== initial) {
      const text = stale.querySelector('[data-bpm-stale-status]');
      if (text) {
        text.textContent = now;
      }
      stale.hidden = false;
      document.querySelectorAll('[data-bpm-disable-when-stale]').forEach(function (el) {
        el.disabled = true;
      });
    }
  }

  async function refresh() {
    const targets = regions();
    if (inFlight || document.hidden || !targets.length || reviewerIsBusy()) {
      return;
    }
    inFlight = true;
    try {
      const response = await fetch(window.location.href, {
        credentials: 'same-origin',
        cache: 'no-store',
        headers: {'X-Requested-With': 'XMLHttpRequest'},
      });
      // A redirect means the session ended (login page): leave the page alone.
      if (!response.ok || response.redirected) {
        return;
      }
      const freshDoc = new DOMParser().parseFromString(await response.text(), 'text/html');
      if (reviewerIsBusy()) {
        return;
      }
      let swappedRows = false;
      targets.forEach(function (el) {
        const fresh = freshDoc.getElementById(el.id);
        if (!fresh) {
          return;
        }
        const node = document.importNode(fresh, true);
        keepDetailsState(el, node); // before comparing: an opened <details> is no change
        if (node.innerHTML !== el.innerHTML) {
          swappedRows = swappedRows || Boolean(el.querySelector('#result_list, div.actions'));
          el.replaceWith(node);
        }
      });
      if (swappedRows) {
        rebindAdminActions();
      }
      noticeStatusChange(freshDoc);
    } catch (error) {
      // Offline or server restarting: try again at the next tick.
    } finally {
      inFlight = false;
    }
  }

  window.setInterval(refresh, interval);
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) {
      refresh();
    }
  });
})();
