#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol (a pipe, no extra packages) for the dashboard tests.

Usage: browser.py URL [--wait-for JS] [--eval JS ...] [--screenshot FILE] [--viewport-only] [--timeout SECONDS] [--size W,H]

Opens URL, waits until the expression --wait-for is true (so a page that renders after its
fetches is screenshotted once it has rendered), takes the screenshot, evaluates each --eval,
and prints one JSON object: {"results": [...], "dialogs": [...], "exceptions": [...]}.
A dialog (alert, confirm) or an uncaught exception is recorded, never waited on: a hostile
payload that runs script shows up there. Exits 1 if --wait-for never became true.
"""
import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class DevTools:
    def __init__(self, size):
        binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
        if not binary:
            sys.exit("browser.py: no chromium on PATH; install Debian's chromium package")
        self.profile = tempfile.mkdtemp(prefix="cmdbus-chromium-")
        def high(fd):  # out of the way of 3 and 4, which the child's ends must become
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return moved
        to_chrome_r, self.to_chrome = (high(fd) for fd in os.pipe())
        self.from_chrome, from_chrome_w = (high(fd) for fd in os.pipe())
        # Chromium reads commands on descriptor 3 and writes replies on 4.
        def wire():
            os.dup2(to_chrome_r, 3, inheritable=True)
            os.dup2(from_chrome_w, 4, inheritable=True)
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--hide-scrollbars",
             "--no-first-run", "--disable-extensions", "--user-data-dir=" + self.profile, "--window-size=" + size],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None
        self.dialogs = []
        self.exceptions = []
        # Replies by id: a dialog answered while a call waits (a click that opens confirm()) sends
        # a call of its own, whose loop may read the waiting call's reply.
        self.replies = {}

    def send(self, method, params=None, session=True):
        self.next_id += 1
        call = self.next_id
        message = {"id": call, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        while call not in self.replies:
            self.read()
        reply = self.replies.pop(call)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def read(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(raw)
        if "id" in message:
            self.replies[message["id"]] = message
        method = message.get("method")
        if method == "Page.javascriptDialogOpening":
            self.dialogs.append(message["params"].get("message"))
            self.send("Page.handleJavaScriptDialog", {"accept": True})
        elif method == "Runtime.exceptionThrown":
            details = message["params"]["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description") or details.get("text"))
        return message

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            return {"error": result["exceptionDetails"].get("text")}
        return result.get("result", {}).get("value")

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--wait-for", default="document.readyState === 'complete'")
    parser.add_argument("--eval", action="append", default=[])
    parser.add_argument("--screenshot")
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--size", default="1280,900")
    parser.add_argument("--viewport-only", action="store_true", help="screenshot the window, not the whole page")
    options = parser.parse_args()
    browser = DevTools(options.size)
    status = 0
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        browser.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        browser.send("Page.enable")
        browser.send("Runtime.enable")
        width, height = (int(x) for x in options.size.split(","))
        browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        browser.send("Page.navigate", {"url": options.url})
        deadline = time.time() + options.timeout
        while browser.evaluate(f"Boolean({options.wait_for})") is not True:
            if time.time() > deadline:
                status = 1
                break
            time.sleep(0.1)
        time.sleep(0.3)  # let the last paint land
        if options.screenshot:
            shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": not options.viewport_only})
            with open(options.screenshot, "wb") as file:
                file.write(base64.b64decode(shot["data"]))
        results = [browser.evaluate(expression) for expression in options.eval]
        print(json.dumps({"results": results, "dialogs": browser.dialogs, "exceptions": browser.exceptions, "waited": status == 0}))
    finally:
        browser.close()
    sys.exit(status)


if __name__ == "__main__":
    main()
