// The Devices page's switch: subscribe this browser to push notifications (Push API, the
// server's VAPID key) and save the subscription, or unsubscribe it and remove it.
(function () {
  "use strict";
  const panel = document.getElementById("bpm-push");
  if (!panel || !panel.dataset.publicKey) return;
  const state = document.getElementById("bpm-push-state");
  const on = document.getElementById("bpm-push-on");
  const off = document.getElementById("bpm-push-off");

  function say(text) {
    state.textContent = text;
  }

  function keyBytes(base64url) {
    const padded = base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4);
    const raw = atob(padded);
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  }

  async function call(method, body) {
    const response = await fetch(panel.dataset.endpoint, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": panel.dataset.csrf },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let message = `The server answered ${response.status}.`;
      try {
        message = (await response.json()).error.message;
      } catch (error) {
        /* not the error envelope: keep the status */
      }
      throw new Error(message);
    }
    return response.json();
  }

  async function registration() {
    return navigator.serviceWorker.register(panel.dataset.serviceWorker);
  }

  async function show() {
    const reg = await registration();
    const current = await reg.pushManager.getSubscription();
    on.hidden = Boolean(current);
    off.hidden = !current;
    say(current ? "Notifications are on for this device." : "Notifications are off for this device.");
  }

  on.addEventListener("click", async () => {
    try {
      if ((await Notification.requestPermission()) !== "granted") {
        say("This browser does not allow notifications from this site: allow them in its settings.");
        return;
      }
      const reg = await registration();
      const subscription = await reg.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(panel.dataset.publicKey),
      });
      await call("POST", subscription.toJSON());
      window.location.reload();
    } catch (error) {
      say(`Could not turn notifications on: ${error.message}`);
    }
  });

  off.addEventListener("click", async () => {
    try {
      const reg = await registration();
      const current = await reg.pushManager.getSubscription();
      if (current) {
        await call("DELETE", { endpoint: current.endpoint });
        await current.unsubscribe();
      }
      window.location.reload();
    } catch (error) {
      say(`Could not turn notifications off: ${error.message}`);
    }
  });

  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    say("This browser cannot receive push notifications (on an iPhone: add the console to the Home Screen first).");
    return;
  }
  show().catch((error) => say(`Could not check this browser: ${error.message}`));
})();
