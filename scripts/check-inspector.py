#!/usr/bin/python3
"""The inspector in a real browser: headless Chromium through chromedriver, driven by Selenium.

Starts `Inspector` (Examples/Inspector: a store with uploads, a failed report whose error holds markup,
approvals, worked in the same process) on a free port of 127.0.0.1, then checks, as a user clicks:
the runs page lists the store's runs with counts by state; the filters narrow them (state, workflow,
tag); a run's page shows its failed step and its error as text (no script runs: no alert, no script
element made from it, no console error: the content security policy held); the retry button retries
the run and the page shows it completed without a reload; the graph and the timeline are drawn.
Screenshots of both pages go to the folder given (docs/ when making the README's pictures).

usage: scripts/check-inspector.py INSPECTOR_BINARY SCREENSHOT_FOLDER
"""
import os
import re
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

binary, shots = sys.argv[1], sys.argv[2]
os.makedirs(shots, exist_ok=True)
folder = tempfile.mkdtemp(prefix="inspector-")
server = subprocess.Popen([binary, os.path.join(folder, "store.sqlite"), "--port", "0"],
                          stdout=subprocess.PIPE, text=True)
failures = []


def check(condition, message):
    print(("ok   " if condition else "FAIL ") + message, flush=True)
    if not condition:
        failures.append(message)


driver = None
try:
    line = server.stdout.readline()  # printed once the runs are made and the inspector listens
    match = re.search(r"http://127\.0\.0\.1:\d+/", line)
    if not match:
        raise SystemExit(f"the inspector printed no address: {line!r}")
    base = match.group(0)
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chromedriver = "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else "chromedriver"
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    # The run's content is replaced on each change: an element read as it goes is read again.
    wait = WebDriverWait(driver, 30, ignored_exceptions=[StaleElementReferenceException])

    def rows():
        return [row.get_attribute("data-run") for row in driver.find_elements(By.CSS_SELECTOR, "#runs tr")]

    def refreshed():
        return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed") or 0)

    # The runs page.
    driver.get(base)
    wait.until(lambda _: len(rows()) == 9)
    check(sorted(rows()) == sorted([f"upload-{i}" for i in range(1, 7)] + ["report-march", "approve-42", "approve-7"]),
          f"the runs page lists the store's 9 runs: {rows()}")
    counts = {box.get_attribute("data-state"): box.text for box in driver.find_elements(By.CSS_SELECTOR, ".count")}
    check(counts.get("completed") == "completed 6" and counts.get("failed") == "failed 1"
          and counts.get("cancelled") == "cancelled 1", f"the counts by state: {counts}")
    driver.save_screenshot(os.path.join(shots, "inspector-runs.png"))

    # The filters narrow the list.
    def filtered(state="", workflow="", tag=""):
        before = refreshed()
        Select(driver.find_element(By.ID, "state")).select_by_value(state)
        for name, value in [("workflow", workflow), ("tag", tag)]:
            field = driver.find_element(By.ID, name)
            field.clear()
            field.send_keys(value)
        driver.find_element(By.ID, "apply").click()
        wait.until(lambda _: refreshed() > before)
        return rows()

    check(filtered(state="failed") == ["report-march"], "state = failed: the failed report only")
    check(sorted(filtered(workflow="upload")) == [f"upload-{i}" for i in range(1, 7)], "workflow = upload: 6 uploads")
    check(filtered(tag="vip") == ["approve-42"], "tag = vip: the tagged approval only")
    check(len(filtered()) == 9, "no filter: all 9 again")

    # A run's page: its failed step and error, as text.
    driver.find_element(By.CSS_SELECTOR, '#runs tr[data-run="report-march"] a').click()
    wait.until(lambda _: driver.find_elements(By.ID, "state"))
    check(driver.find_element(By.ID, "state").text == "failed", "the run's page: the run failed")
    error = driver.find_element(By.ID, "run-error").text
    check("<script>alert(1)</script> template missing" in error, f"the error shown as text: {error!r}")
    render = driver.find_element(By.CSS_SELECTOR, '#steps tr[data-step="render"]').text
    check("failed" in render and "<script>alert(1)</script>" in render, f"the failed step and its error: {render!r}")
    try:
        driver.switch_to.alert
        check(False, "no alert ran")
    except NoAlertPresentException:
        check(True, "no alert ran (the escaping held)")
    check(len(driver.find_elements(By.CSS_SELECTOR, "main script")) == 0, "no script element made from the error")
    check(len(driver.find_elements(By.CSS_SELECTOR, "svg.graph g.step")) == 4, "the graph: 4 steps")
    check(len(driver.find_elements(By.CSS_SELECTOR, "svg.graph g.step.critical")) == 3,
          "the critical path: 3 steps (a part, render, publish)")
    check(len(driver.find_elements(By.CSS_SELECTOR, "svg.timeline rect.bar")) == 3, "the timeline: 3 bars (publish never ran)")
    driver.save_screenshot(os.path.join(shots, "inspector-run.png"))

    # Retry: the run goes on and the page follows it without a reload.
    loaded = driver.execute_script("return window.loadedAt")
    driver.find_element(By.ID, "retry").click()
    wait.until(lambda _: driver.find_element(By.ID, "state").text == "completed")
    check(True, "after Retry the page shows the run completed")
    check(driver.execute_script("return window.loadedAt") == loaded, "without a reload")
    render = driver.find_element(By.CSS_SELECTOR, '#steps tr[data-step="render"]').text
    check("completed" in render and " 2 " in f" {render} ", f"render completed on attempt 2: {render!r}")
    check(not driver.find_elements(By.ID, "retry"), "no Retry button for a completed run")

    # A change made elsewhere (the API, as another page or a script would) reaches the page live.
    driver.get(base)
    wait.until(lambda _: len(rows()) == 9)
    before = refreshed()
    subprocess.run(["curl", "-s", "-X", "POST", "-H", "X-Durable-Token;", base + "api/cancel?id=approve-42"],
                   check=True, capture_output=True)
    wait.until(lambda _: refreshed() > before and "cancelled 2" in driver.find_element(By.ID, "counts").text)
    check(True, "a cancel made elsewhere shows on the runs page without a reload")

    severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    check(not severe, f"no error in the browser's console: {severe}")
finally:
    if driver:
        driver.quit()
    server.terminate()
    server.wait(timeout=10)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("inspector: every check passed")
