"""The web console in headless Chromium (Debian's chromium through /usr/bin/chromedriver).

Runs against one node that scripts/console-test started; with --key the node has a key file
and the scenario signs in first. The scenario, at 1280 px wide: sign in (a wrong key first),
create a dead-letter queue and a queue bound to it (a bad setting first: its error beside the
field, nothing created), send and peek a message, see the binding from both sides, try to delete
the bound dead-letter queue and see the refusal, dead-letter a message (received and released
through the REST API) and move it back with a move task seen completing, detach, delete; the
cluster page with its chart; then every page again at 390 px, where nothing may overflow the
window sideways; a keyboard pass. With --open-mode it checks instead that a node without a key
file opens the `dev` account directly. After each step the browser's log must hold no error or
warning, except the network entries of the refusals the scenario provokes itself.

Screenshots of each page go to --screenshots (`scripts/console-test --screenshots docs/console`
refreshes those of docs/console.md).
Exits non-zero on the first failed check.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

WAIT_SECONDS = 15


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


class Rest:
    """The REST API, for what the console does not do (receiving) and for checking its work."""

    def __init__(self, endpoint, key):
        self.endpoint = endpoint
        self.key = key

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)
        if self.key:
            request.add_header("Authorization", "Bearer " + self.key)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
                return response.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")


class Console:
    def __init__(self, endpoint, screenshots):
        self.endpoint = endpoint
        self.screenshots = screenshots
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--hide-scrollbars", "--no-first-run",
                     "--disable-extensions", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--lang=en-US"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        self.driver.set_window_size(1280, 900)
        self.width = 1280
        # Network refusals the scenario provokes on purpose: (status, what it was).
        self.expected_refusals = set()

    def close(self):
        self.driver.quit()

    def report(self):
        """What the page showed and the browser logged, for a failure's diagnosis."""
        print("at " + self.driver.current_url, file=sys.stderr)
        print("page text:\n" + self.text("body"), file=sys.stderr)
        for entry in self.driver.get_log("browser"):
            print(f"browser log: {entry['level']} {entry.get('source')}: {entry['message']}",
                  file=sys.stderr)

    # --- waiting and finding ---

    def wait(self, condition, what, seconds=WAIT_SECONDS):
        try:
            # The live parts of a page are redrawn every second: an element found a moment ago
            # may be gone, so a stale one is a "not yet".
            return WebDriverWait(self.driver, seconds, poll_frequency=0.1,
                                 ignored_exceptions=(StaleElementReferenceException,)).until(
                lambda d: condition())
        except TimeoutException:
            raise Failure("timed out waiting for " + what) from None

    def find(self, css):
        return self.wait(lambda: self.first(css), css)

    def first(self, css):
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return found[0] if found else None

    def text(self, css):
        """The text of the first element matching `css` (empty when none), read again when a
        redraw replaced the element meanwhile."""
        for _ in range(20):
            try:
                element = self.first(css)
                return element.text if element else ""
            except StaleElementReferenceException:
                time.sleep(0.05)
        raise Failure("the page kept redrawing " + css)

    def wait_text(self, css, needle):
        self.wait(lambda: needle in self.text(css), f"{needle!r} in {css}")

    def click(self, css):
        for _ in range(20):
            try:
                self.find(css).click()
                return
            except StaleElementReferenceException:
                time.sleep(0.05)
        raise Failure("could not click " + css)

    def type(self, css, text):
        """Replaces a field's text by keyboard, so the page sees every change as typed."""
        element = self.find(css)
        element.send_keys(Keys.CONTROL, "a")
        element.send_keys(Keys.BACKSPACE)
        if text:
            element.send_keys(text)

    def confirm(self):
        self.click("dialog[open] #confirm-yes")
        self.wait(lambda: self.first("dialog[open]") is None, "the dialog to close")

    def go(self, hash_):
        self.driver.get(self.endpoint + "/console" + hash_)

    # --- the browser's log ---

    def check_log(self, step):
        shown = self.text("body")
        for slip in ("[object", "undefined", "NaN"):
            check(slip not in shown, f"the page shows {slip!r} after {step}:\n{shown}")
        check("null" not in shown.splitlines(), f"the page shows a bare null after {step}:\n{shown}")
        problems = []
        for entry in self.driver.get_log("browser"):
            if entry["level"] not in ("SEVERE", "WARNING"):
                continue
            message = entry["message"]
            if entry.get("source") == "network" and any(
                    f"status of {status}" in message for status in self.expected_refusals):
                continue
            problems.append(f"{entry['level']} {entry.get('source')}: {message}")
        check(not problems, f"the browser logged after {step}:\n  " + "\n  ".join(problems))
        self.expected_refusals.clear()

    def expect_refusal(self, status):
        self.expected_refusals.add(status)

    # --- screenshots and layout ---

    def shoot(self, name):
        if not self.screenshots:
            return
        # The window's height around the page: the page's own plus what the browser keeps.
        height, frame = self.driver.execute_script(
            "return [Math.max(document.documentElement.scrollHeight, document.body.scrollHeight),"
            " window.outerHeight - window.innerHeight]")
        self.driver.set_window_size(self.width, min(max(int(height + frame), 600), 3200))
        self.driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.2)
        path = os.path.join(self.screenshots, name + ".png")
        check(self.driver.save_screenshot(path), "saving " + path)
        self.driver.set_window_size(self.width, 900)

    def resize(self, width):
        self.width = width
        self.driver.set_window_size(width, 900)

    def no_sideways_overflow(self, page):
        wide = self.driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]")
        check(wide[0] <= wide[1], f"{page} at {self.width} px is {wide[0]} px wide")


def field(form, name):
    return f'#{form} [data-field="{name}"]'


def error_beside(console, form, name):
    """The error shown beside a field (empty when none)."""
    return console.text(field(form, name) + " ~ .field-error")


def sign_in(console, key):
    console.go("")
    console.expect_refusal(401)
    console.find("#sign-in")
    check(console.first("#sections").get_attribute("hidden") is not None,
          "sections are hidden before signing in")
    console.type(field("sign-in", "key"), "not-the-key")
    console.click("#sign-in button[type=submit]")
    console.wait(lambda: error_beside(console, "sign-in", "key"), "the wrong key's error")
    check("key" in error_beside(console, "sign-in", "key").lower(),
          "the wrong key's error names the key: " + error_beside(console, "sign-in", "key"))
    check(console.driver.execute_script("return sessionStorage.length") == 0,
          "a wrong key is not kept")
    console.shoot("sign-in")
    console.type(field("sign-in", "key"), key)
    console.click("#sign-in button[type=submit]")
    console.find("#queues")
    check(key not in console.driver.current_url, "the key is never in the URL")
    check(console.driver.execute_script("return sessionStorage.getItem('raftq.console.key')") == key,
          "the key is kept in session storage")
    console.check_log("signing in")


def create_queue(console, name, dlq=None, max_receives=None):
    if console.first("#new-queue[open]") is None:
        console.click("#new-queue summary")
    console.type(field("create-queue", "name"), name)
    if dlq:
        console.type(field("create-queue", "redrive_policy.dead_letter_target"), dlq)
        console.type(field("create-queue", "redrive_policy.max_receive_count"), str(max_receives))
    console.click("#create-queue button[type=submit]")
    console.wait_text("#queue-rows", name)


def queues_page(console, rest):
    console.go("#/queues")
    console.find("#queues")
    if console.first("#new-queue[open]") is None:
        console.click("#new-queue summary")
    # A refused create: the API's error beside the field, nothing created.
    console.expect_refusal(400)
    console.type(field("create-queue", "name"), "console-bad")
    console.type(field("create-queue", "lease_seconds"), "99999")
    console.click("#create-queue button[type=submit]")
    console.wait(lambda: error_beside(console, "create-queue", "lease_seconds"),
                 "the lease's error beside its field")
    check(console.find(field("create-queue", "lease_seconds")).get_attribute("aria-invalid") == "true",
          "the refused field is marked invalid")
    status, _ = rest.call("GET", "/v1/queues/console-bad")
    check(status == 404, f"a refused create created nothing ({status})")
    check(console.find(field("create-queue", "name")).get_attribute("value") == "console-bad",
          "the form keeps what was typed")
    console.type(field("create-queue", "lease_seconds"), "")
    console.check_log("a refused create")

    create_queue(console, "orders-dlq")
    create_queue(console, "orders", dlq="orders-dlq", max_receives=1)
    row = console.find('tr[data-queue="orders"]')
    check("standard" in row.text, "the table shows the type: " + row.text)
    # The filter.
    console.type("#prefix", "orders-d")
    console.wait(lambda: console.first('tr[data-queue="orders"]') is None, "the filter")
    check(console.first('tr[data-queue="orders-dlq"]') is not None, "the filter keeps matches")
    console.type("#prefix", "")
    console.find('tr[data-queue="orders"]')
    console.check_log("creating queues")


def queue_page(console, rest):
    console.click('tr[data-queue="orders"] th a')
    console.find("#send-message")
    console.wait_text("#dead-letter-target", "orders-dlq")
    console.type(field("send-message", "body"), '{"order": 1}')
    console.type(field("send-message", "attributes"), "color=blue")
    console.click("#send-message button[type=submit]")
    console.wait_text("#peek-rows", '{"order": 1}')
    peeked = console.text("#peek-rows")
    check("visible" in peeked and "color=blue" in peeked, "the peeked message: " + peeked)
    console.wait_text("#queue-stats", "1 visible")
    # Peeking took no lease and counted no receive.
    _, stats = rest.call("GET", "/v1/queues/orders/stats")
    check(stats["visible"] == 1 and stats["leased"] == 0, f"peek changed nothing: {stats}")
    # A refused send keeps the form and shows the error beside the field.
    console.expect_refusal(400)
    console.type(field("send-message", "body"), "x")
    console.type(field("send-message", "delay_seconds"), "5000")
    console.click("#send-message button[type=submit]")
    console.wait(lambda: error_beside(console, "send-message", "delay_seconds"), "the delay's error")
    console.type(field("send-message", "delay_seconds"), "")
    console.type(field("send-message", "body"), "")
    _, stats = rest.call("GET", "/v1/queues/orders/stats")
    check(stats["visible"] + stats["delayed"] == 1, f"a refused send sent nothing: {stats}")
    console.shoot("queue")
    console.check_log("the queue page")

    # Settings: a refused change changes nothing, an accepted one shows.
    console.click("#edit-queue-details summary")
    console.expect_refusal(400)
    console.type(field("edit-queue", "lease_seconds"), "45")
    console.type(field("edit-queue", "retention_seconds"), "5")
    console.click("#edit-queue button[type=submit]")
    console.wait(lambda: error_beside(console, "edit-queue", "retention_seconds"), "the retention's error")
    _, orders = rest.call("GET", "/v1/queues/orders")
    check(orders["lease_seconds"] == 30, f"a refused patch changed nothing: {orders['lease_seconds']}")
    console.type(field("edit-queue", "retention_seconds"), "345600")
    console.click("#edit-queue button[type=submit]")
    console.wait_text("#settings", "45 s")
    _, orders = rest.call("GET", "/v1/queues/orders")
    check(orders["lease_seconds"] == 45, "the patch applied")
    check(orders["redrive_policy"] is not None, "the patch kept the redrive policy")
    console.check_log("editing settings")


def dead_letter_page(console, rest):
    console.click("#dead-letter-target a")
    console.wait_text("#dead-letter-sources", "orders")
    console.find("#move")
    # Deleting the bound dead-letter queue is refused, with its sources listed.
    console.expect_refusal(409)
    console.click("#delete-queue")
    console.confirm()
    console.wait_text("#delete-refusal", "orders")
    check(console.first("#refusal-detach-orders") is not None, "the refusal offers a detach")
    status, _ = rest.call("GET", "/v1/queues/orders-dlq")
    check(status == 200, "the refused delete deleted nothing")
    console.shoot("dead-letter-refusal")
    console.check_log("the refused delete")

    # Three messages dead-lettered (received, then released at their last receive): a slow
    # move task is cancelled, a second one moves the rest back.
    for body in ('{"order": 2}', '{"order": 3}'):
        rest.call("POST", "/v1/queues/orders/messages", {"body": body})
    _, received = rest.call("POST", "/v1/queues/orders/receive", {"max_messages": 10})
    check(len(received["messages"]) == 3, f"received the sent messages: {received}")
    for message in received["messages"]:
        rest.call("POST", "/v1/queues/orders/lease",
                  {"receipt": message["receipt"], "lease_seconds": 0})
    console.wait_text("#queue-stats", "3 visible")
    console.click("#peek-refresh")
    console.wait_text("#peek-rows", '{"order": 1}')
    check("orders" in console.text("#peek-rows td:nth-child(7)"),
          "a dead letter names its source: " + console.text("#peek-rows"))
    console.type(field("start-move", "max_messages_per_second"), "1")
    console.click("#start-move button[type=submit]")
    console.wait_text("#task-rows", "running")
    console.click("#task-rows button")
    console.wait_text("#task-rows", "cancelled")
    console.click("#start-move button[type=submit]")
    console.wait(lambda: console.text("#task-rows tr:first-child td:nth-child(2)") == "completed",
                 "the second task to complete")
    console.wait_text("#peek-status", "No messages.")
    _, stats = rest.call("GET", "/v1/queues/orders/stats")
    check(stats["visible"] == 3, f"the messages are back in orders: {stats}")
    _, tasks = rest.call("GET", "/v1/queues/orders-dlq/move_tasks")
    statuses = [t["status"] for t in tasks["tasks"]]
    check(statuses == ["completed", "cancelled"], f"the tasks: {statuses}")
    check(sum(t["moved"] for t in tasks["tasks"]) == 3, f"three moved in all: {tasks}")
    console.shoot("move-task")
    console.check_log("the move task")

    # Detach from the refusal's list, then the delete goes through.
    console.click("#delete-queue")
    console.expect_refusal(409)
    console.confirm()
    console.find("#refusal-detach-orders")
    console.click("#refusal-detach-orders")
    console.confirm()
    console.wait(lambda: console.first("#dead-letter-sources") is None, "the detach")
    _, orders = rest.call("GET", "/v1/queues/orders")
    check(orders["redrive_policy"] is None, "the source's redrive policy is removed")
    console.click("#delete-queue")
    console.confirm()
    console.find("#queues")
    console.wait(lambda: console.first('tr[data-queue="orders-dlq"]') is None, "the deleted queue to go")
    status, _ = rest.call("GET", "/v1/queues/orders-dlq")
    check(status == 404, "the dead-letter queue is deleted")
    console.check_log("detaching and deleting")


def traffic(rest, seconds):
    """Sends, receives and acknowledges messages on `orders` for a while, for the charts."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        entries = [{"id": str(i), "body": f"load {i}"} for i in range(10)]
        rest.call("POST", "/v1/queues/orders/messages/batch", {"entries": entries})
        _, got = rest.call("POST", "/v1/queues/orders/receive", {"max_messages": 10})
        receipts = [m["receipt"] for m in got["messages"] if m["body"].startswith("load ")]
        if receipts:
            rest.call("POST", "/v1/queues/orders/ack", {"receipts": receipts})
        time.sleep(0.1)


def cluster_page(console, rest):
    console.click("#nav-cluster")
    console.find("#nodes")
    check("leader" in console.text("#nodes"), "a leader is shown: " + console.text("#nodes"))
    # Every member's own figures, as it answered the pings of the node serving the page.
    for field in ("last_log_index", "commit_index", "applied_index"):
        console.wait(lambda: console.driver.execute_script(
            "const cells = [...document.querySelectorAll('#nodes td[data-field=\"" + field + "\"]')];"
            "return cells.length === 3 && cells.every((c) => /^[0-9]+$/.test(c.textContent));"),
            f"every member's {field} on the cluster page", seconds=10)
    load = threading.Thread(target=traffic, args=(rest, 5))
    load.start()
    try:
        # The traffic seen in the chart's legend as it happens.
        console.wait(lambda: any(f"{name}: 0.0 " not in console.text("#throughput-chart figcaption")
                                 for name in ("sends/s", "acks/s")),
                     "the throughput chart to show the traffic", seconds=10)
        console.wait(lambda: "– ms" not in console.text("#latency-chart figcaption"),
                     "the latency chart to show the writes", seconds=10)
    finally:
        load.join()
    console.wait(lambda: console.driver.execute_script(
        "const p = document.querySelector('#throughput-chart polyline');"
        "return p !== null && p.getAttribute('points').split(' ').length >= 6"),
        "the throughput chart's line", seconds=10)
    # The facts come from one reading: this node never shows more applied than committed,
    # and its own row of the table agrees with them.
    facts = console.driver.execute_script(
        "const f = {}; const dts = [...document.querySelectorAll('#cluster-facts dt')];"
        "for (const dt of dts) f[dt.textContent] = dt.nextElementSibling.textContent;"
        "const own = [...document.querySelectorAll('#nodes tbody tr')]"
        ".find((tr) => tr.querySelector('th').textContent.includes('(this node)'));"
        "const cell = own && own.querySelector('td[data-field=\"applied_index\"]');"
        "f.row = cell ? cell.textContent : null; return f;")
    committed, applied = int(facts["Commit index"]), int(facts["Applied index (this node)"])
    check(applied <= committed, f"applied {applied} at most committed {committed}: {facts}")
    check(int(facts["Apply lag (this node)"]) == committed - applied, f"the apply lag: {facts}")
    check(facts["row"] == str(applied), f"this node's row shows the same applied index: {facts}")
    # The cluster runs as one group, which holds every queue of the account.
    _, listed = rest.call("GET", "/v1/queues")
    queues = str(len(listed["queues"]))
    console.wait(lambda: console.driver.execute_script(
        "const row = document.querySelector('#groups tr[data-group=\"1\"]');"
        "return row && row.querySelector('td[data-field=\"queues\"]').textContent;") == queues,
        f"group 1 with the account's {queues} queues on the cluster page", seconds=10)
    console.shoot("cluster")
    console.check_log("the cluster page")


def narrow(console):
    console.resize(390)
    console.go("#/queues")
    console.find('tr[data-queue="orders"]')
    console.no_sideways_overflow("the queues page")
    console.shoot("queues-390")
    console.click('tr[data-queue="orders"] th a')
    console.find("#peek-rows tr")
    console.no_sideways_overflow("the queue page")
    console.shoot("queue-390")
    console.click("#nav-cluster")
    console.find("#nodes")
    console.no_sideways_overflow("the cluster page")
    console.shoot("cluster-390")
    console.resize(1280)
    console.check_log("the narrow pages")


def keyboard(console, rest):
    """The queue page by keyboard: tabbing reaches only real controls, each showing its focus;
    Escape cancels a confirmation, changing nothing."""
    console.go("#/queues")
    console.find('tr[data-queue="orders"]')
    def tab():
        ActionChains(console.driver).send_keys(Keys.TAB).perform()

    console.driver.refresh()
    console.find('tr[data-queue="orders"]')
    # The page's first control, as a first Tab would reach it.
    console.find("#skip").send_keys(Keys.SHIFT)
    check(console.driver.switch_to.active_element.get_attribute("id") == "skip",
          "the skip link comes first")
    seen = []
    for _ in range(30):
        active = console.driver.switch_to.active_element
        tag = active.tag_name.lower()
        if tag == "body":
            break  # past the page's last control
        check(tag in ("a", "button", "input", "select", "textarea", "summary", "div"),
              f"focus lands on a control, not {tag} (after {seen})")
        if tag == "div":
            check(active.get_attribute("tabindex") == "0", "a focusable region is a scroll area")
        outline = console.driver.execute_script(
            "return getComputedStyle(arguments[0]).outlineStyle", active)
        check(outline != "none", f"{tag} {active.text!r} shows its focus")
        seen.append(active.get_attribute("id") or active.text)
        tab()
    check(any("orders" in s for s in seen), f"tabbing reaches the queue links: {seen}")
    console.find("#delete-orders").send_keys(Keys.ENTER)
    console.find("dialog[open]")
    console.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    console.wait(lambda: console.first("dialog[open]") is None, "Escape to close the dialog")
    status, _ = rest.call("GET", "/v1/queues/orders")
    check(status == 200, "a cancelled delete deleted nothing")
    # The live rates, with traffic to show.
    load = threading.Thread(target=traffic, args=(rest, 4))
    load.start()
    try:
        console.wait(lambda: console.text('tr[data-queue="orders"] td:nth-child(8)') not in ("", "–", "0.0"),
                     "the sends per second of orders")
    finally:
        load.join()
    console.shoot("queues")
    console.check_log("the keyboard pass")

    console.click("#purge-orders")
    console.confirm()
    console.wait(lambda: console.text('tr[data-queue="orders"] td:nth-child(3)') == "0", "the purge")
    _, stats = rest.call("GET", "/v1/queues/orders/stats")
    check(stats["visible"] + stats["leased"] + stats["delayed"] == 0, f"the purge emptied orders: {stats}")
    console.check_log("purging")


def peek_pages(console, rest):
    """Peek in pages of ten, forwards and back, leaving the messages as they were."""
    rest.call("POST", "/v1/queues", {"name": "pages"})
    for first in (0, 10):
        entries = [{"id": str(i), "body": f"page message {first + i}"} for i in range(10)]
        rest.call("POST", "/v1/queues/pages/messages/batch", {"entries": entries[:12 - first]})
    console.go("#/queue/pages")
    console.wait_text("#peek-status", "Page 1: 10 messages")
    check("page message 0" in console.text("#peek-rows"), "the first page starts at the oldest")
    check(console.find("#peek-prev").get_attribute("disabled") is not None, "no page before the first")
    console.click("#peek-next")
    console.wait_text("#peek-status", "Page 2: 2 messages")
    check("page message 11" in console.text("#peek-rows"), "the second page: " + console.text("#peek-rows"))
    check(console.find("#peek-next").get_attribute("disabled") is not None, "no page after the last")
    console.click("#peek-prev")
    console.wait_text("#peek-status", "Page 1: 10 messages")
    _, stats = rest.call("GET", "/v1/queues/pages/stats")
    check(stats["visible"] == 12 and stats["leased"] == 0, f"peeking changed nothing: {stats}")
    console.check_log("peeking page by page")

    # Deleted elsewhere while its page is open: the page says the queue is gone.
    console.expect_refusal(404)
    rest.call("DELETE", "/v1/queues/pages")
    console.wait_text("main", "Cannot show this page")
    check("pages" in console.text("main") and console.first("#peek-rows") is None,
          "the page of a deleted queue says it is gone: " + console.text("main"))
    check("Refresh failed" not in console.text("body"), "no refresh failure shown")
    console.check_log("a queue deleted elsewhere")

    # A queue that does not exist (any more): the API's answer, and a way back.
    console.expect_refusal(404)
    console.go("#/queue/no-such-queue")
    console.wait_text("main", "Cannot show this page")
    check("no-such-queue" in console.text("main"), "the error names the queue: " + console.text("main"))
    console.find('main a[href="#/queues"]')
    console.check_log("a missing queue")


def open_mode(console):
    console.go("")
    console.find("#queues")
    check("open mode" in console.text("#who"), "open mode says so: " + console.text("#who"))
    check(console.first("#sign-in") is None, "no sign-in in open mode")
    console.check_log("opening in open mode")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--key", help="the node's API key (sign-in scenario)")
    parser.add_argument("--open-mode", action="store_true", help="check a node without a key file")
    parser.add_argument("--screenshots", help="where to save the pages' screenshots")
    args = parser.parse_args()
    started = time.monotonic()
    console = Console(args.endpoint, args.screenshots)
    try:
        if args.open_mode:
            open_mode(console)
        else:
            rest = Rest(args.endpoint, args.key)
            sign_in(console, args.key)
            queues_page(console, rest)
            queue_page(console, rest)
            dead_letter_page(console, rest)
            cluster_page(console, rest)
            narrow(console)
            keyboard(console, rest)
            peek_pages(console, rest)
            rest.call("DELETE", "/v1/queues/orders")
    except Failure as failure:
        print(f"console test: FAILED: {failure}", file=sys.stderr)
        console.report()
        return 1
    finally:
        console.close()
    mode = "open mode" if args.open_mode else "signed in"
    print(f"console test: passed ({mode}, {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
