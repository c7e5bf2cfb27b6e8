#!/usr/bin/env python3
"""Drives the admin web console in a real headless Chromium (over the DevTools protocol).

    python3 Tests/console/check_console.py --url http://127.0.0.1:PORT/console --key KEY \
        --expect "hello from ops" --expect alice --screenshot out.png

Opens the page, enters the admin key in its form, waits (with a deadline) until the page's text
shows every --expect string, checks the live chart was drawn, saves a screenshot, and exits 0;
anything else exits 1 with what the page showed. Needs `chromium` and the `websocket-client`
pip package.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Page:
    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no chromium on PATH (apt-get install chromium)")


def start_browser(profile):
    args = [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
            f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank"]
    browser = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if lines:
                return browser, int(lines[0])
        if browser.poll() is not None:
            sys.exit(f"chromium exited with {browser.returncode}")
        time.sleep(0.05)
    browser.kill()
    sys.exit("chromium did not open its DevTools port within 30 s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--channel", help="click this channel's row to inspect it")
    parser.add_argument("--publish", help="publish this text to --channel with the page's publish form")
    parser.add_argument("--next-page", help="then click this list's (channels, sessions) 'next' button")
    parser.add_argument("--then-expect", action="append", default=[], help="text shown after --next-page")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--settle", type=float, default=1.2, help="seconds to let the live chart run before the screenshot")
    options = parser.parse_args()

    profile = tempfile.mkdtemp(prefix="rtm-console-")
    browser, port = start_browser(profile)
    try:
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page_target = next(t for t in targets if t["type"] == "page")
        page = Page(page_target["webSocketDebuggerUrl"])
        page.call("Page.enable")
        page.call("Runtime.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
        page.call("Page.navigate", url=options.url)
        deadline = time.time() + options.timeout
        while not page.evaluate("!!document.getElementById('keyForm')"):
            if time.time() > deadline:
                sys.exit("the console page did not load")
            time.sleep(0.1)
        # The key goes in the page's own form, as an operator types it.
        page.evaluate(f"document.getElementById('key').value = {json.dumps(options.key)};"
                      "document.getElementById('keyForm').requestSubmit(); true")
        while page.evaluate("document.body.dataset.ready") != "true":
            if time.time() > deadline:
                sys.exit("the console never showed the server's data after the key was entered: "
                         + str(page.evaluate("document.body.innerText")))
            time.sleep(0.1)
        if options.channel:
            # Inspect the channel as an operator does: click its row; then use the publish form.
            clicked = page.evaluate(
                "(() => { for (const tr of document.querySelectorAll('#channels tr'))"
                f" if (tr.cells[0] && tr.cells[0].textContent === {json.dumps(options.channel)}) {{ tr.click(); return true; }}"
                " return false; })()")
            if not clicked:
                sys.exit(f"no row for channel {options.channel} in the channel list")
        if options.publish:
            page.evaluate(f"document.getElementById('pubChannel').value = {json.dumps(options.channel)};"
                          f"document.getElementById('pubText').value = {json.dumps(options.publish)};"
                          "document.getElementById('pubForm').requestSubmit(); true")
            options.expect.append(options.publish)
        text = ""
        while time.time() < deadline:
            text = page.evaluate("document.body.dataset.ready === 'true' ? document.getElementById('app').innerText : ''") or ""
            chart_ready = page.evaluate("(() => { const c = document.getElementById('chart');"
                                        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                                        " for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })()")
            stored = page.evaluate("sessionStorage.getItem('rtmAdminKey')")
            if text and all(e in text for e in options.expect) and chart_ready and stored == options.key:
                break
            time.sleep(0.2)
        else:
            print("page text:\n" + text)
            sys.exit(f"the console did not show {options.expect} (and a drawn chart, the key in sessionStorage) within {options.timeout} s")
        if options.next_page:
            # Page through a list as an operator does: its pager's "next" button.
            clicked = page.evaluate(
                f"(() => {{ for (const b of document.querySelectorAll('#{options.next_page}Pager button'))"
                " if (b.textContent.startsWith('next')) { b.click(); return true; } return false; })()")
            if not clicked:
                sys.exit(f"no 'next' button under the {options.next_page} list: "
                         + str(page.evaluate(f"document.getElementById('{options.next_page}Pager').innerText")))
            while time.time() < deadline:
                text = page.evaluate("document.getElementById('app').innerText") or ""
                if all(e in text for e in options.then_expect):
                    break
                time.sleep(0.2)
            else:
                print("page text:\n" + text)
                sys.exit(f"after 'next' the console did not show {options.then_expect} within {options.timeout} s")
            options.expect += options.then_expect
        time.sleep(options.settle)   # more polls, so the chart has points
        shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(options.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"console shows {options.expect}; screenshot {options.screenshot}")
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
