import Foundation

/// The inspector's pages: HTML, CSS and a little JavaScript written here (no file or script from
/// elsewhere). Text from the store is escaped (``Html/escape(_:)``) where the server writes it and set
/// with `textContent` where the page's script writes it.
enum InspectorPages {
    static let style = """
        body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#202124;background:#f8f9fa}
        header{background:#202124;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
        header a{color:#fff;text-decoration:none;font-weight:600}
        main{padding:16px 20px}
        table{border-collapse:collapse;background:#fff;width:100%}
        th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e0e0e0;vertical-align:top}
        th{background:#f1f3f4;font-weight:600}
        .state{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px}
        .pending{background:#9aa0a6}.running{background:#4285f4}.completed{background:#34a853}
        .failed{background:#ea4335}.cancelled{background:#f9ab00}
        .counts{display:flex;gap:10px;margin-bottom:12px}
        .count{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:6px 12px}
        form.filters{display:flex;gap:8px;margin-bottom:12px;align-items:center}
        .error{color:#b3261e;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px}
        .live{font-size:12px;opacity:.8}
        button{padding:4px 12px;border-radius:4px;border:1px solid #5f6368;background:#fff;cursor:pointer}
        section{margin:16px 0}
        svg text{font-family:system-ui,sans-serif}
        #message{color:#b3261e}
        """

    /// The page's frame: header, a token field when one is needed, the content, and the script.
    static func page(title: String, content: String, script: String, nonce: String, needsToken: Bool) -> String {
        let token =
            needsToken
            ? "<label>token <input id=\"token\" type=\"password\" size=\"12\" autocomplete=\"off\"></label>" : ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(Html.escape(title))</title><style>\(style)</style></head>
            <body><header><a href="/">Durable runs</a><span class="live" id="live">connecting…</span>\
            <span style="flex:1"></span>\(token)</header>
            <main id="main">\(content)</main>
            <script nonce="\(nonce)">
            "use strict";
            window.loadedAt = Date.now();
            const token = () => { const field = document.getElementById("token"); return field ? field.value : ""; };
            function listen(path, changed) {
              const live = document.getElementById("live");
              const source = new EventSource(path);
              source.onopen = () => { live.textContent = "live"; };
              source.onerror = () => { live.textContent = "reconnecting…"; };
              let timer = null;
              source.onmessage = (event) => {
                if (timer) return;
                timer = setTimeout(() => { timer = null; changed(JSON.parse(event.data)); }, 150);
              };
            }
            \(script)
            </script></body></html>
            """
    }

    /// The runs page: counts by state, filters, the table; refreshed on every change.
    static func runs(nonce: String, needsToken: Bool) -> String {
        let states = DurableRunState.allCases.map { "<option value=\"\($0.rawValue)\">\($0.rawValue)</option>" }
            .joined()
        let content = """
            <div class="counts" id="counts"></div>
            <form class="filters" id="filters">
            <label>state <select name="state" id="state"><option value="">any</option>\(states)</select></label>
            <label>workflow <input name="workflow" id="workflow" size="16"></label>
            <label>tag <input name="tag" id="tag" size="12"></label>
            <button type="submit" id="apply">Filter</button></form>
            <table><thead><tr><th>run</th><th>state</th><th>workflow</th><th>created</th><th>steps</th>\
            <th>error</th></tr></thead><tbody id="runs"></tbody></table>
            <p id="message"></p>
            """
        let script = """
            const cell = (row, text, className) => {
              const td = document.createElement("td");
              if (className) { const span = document.createElement("span"); span.className = className;
                span.textContent = text; td.appendChild(span); } else { td.textContent = text; }
              row.appendChild(td); return td;
            };
            async function refresh() {
              const query = new URLSearchParams(new FormData(document.getElementById("filters")));
              for (const [key, value] of [...query.entries()]) if (!value) query.delete(key);
              history.replaceState(null, "", query.toString() ? "/?" + query : "/");
              const response = await fetch("/api/runs?" + query);
              const answer = await response.json();
              document.getElementById("message").textContent = answer.error || "";
              const counts = document.getElementById("counts");
              counts.replaceChildren();
              for (const state of ["pending", "running", "completed", "failed", "cancelled"]) {
                const box = document.createElement("span"); box.className = "count"; box.dataset.state = state;
                box.textContent = state + " " + ((answer.counts || {})[state] || 0); counts.appendChild(box);
              }
              const body = document.getElementById("runs");
              body.replaceChildren();
              for (const run of answer.runs || []) {
                const row = document.createElement("tr"); row.dataset.run = run.id;
                const link = document.createElement("a"); link.href = "/run?id=" + encodeURIComponent(run.id);
                link.textContent = run.id; cell(row, "").appendChild(link);
                cell(row, run.state, "state " + run.state);
                cell(row, run.workflow);
                cell(row, new Date(run.created * 1000).toLocaleString());
                cell(row, run.stepsCompleted + " / " + run.steps);
                cell(row, run.error || "", run.error ? "error" : "");
                body.appendChild(row);
              }
              document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
            }
            const params = new URLSearchParams(location.search);
            for (const name of ["state", "workflow", "tag"]) document.getElementById(name).value = params.get(name) || "";
            document.getElementById("filters").addEventListener("submit", (event) => { event.preventDefault(); refresh(); });
            refresh();
            listen("/api/changes", refresh);
            """
        return page(title: "Durable runs", content: content, script: script, nonce: nonce, needsToken: needsToken)
    }

    /// A run's page; its content is replaced from `?fragment=1` on every change of the run.
    static func run(_ record: DurableRunRecord, content: String, nonce: String, needsToken: Bool) -> String {
        let id = jsString(record.id)
        let script = """
            const runID = "\(id)";
            async function reload() {
              const response = await fetch("/run?fragment=1&id=" + encodeURIComponent(runID));
              if (response.ok) document.getElementById("main").innerHTML = await response.text();
              document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
            }
            document.getElementById("main").addEventListener("click", async (event) => {
              const button = event.target.closest("button[data-action]");
              if (!button) return;
              const response = await fetch("/api/" + button.dataset.action + "?id=" + encodeURIComponent(runID),
                { method: "POST", headers: { "X-Durable-Token": token() } });
              const answer = await response.json();
              await reload();
              document.getElementById("message").textContent = response.ok ? "" : answer.error;
            });
            listen("/api/changes?run=" + encodeURIComponent(runID), reload);
            """
        return page(
            title: "Run \(record.id)", content: content, script: script, nonce: nonce, needsToken: needsToken)
    }

    /// A run's content: its state, buttons, graph, timeline and steps.
    static func runContent(_ record: DurableRunRecord, now: Date) -> String {
        let picture = RunPicture(steps: record.steps, now: now)
        let canRetry = record.state == .failed || record.state == .cancelled
        let canCancel = !record.state.isEnded
        var rows = ""
        for step in record.steps {
            let started = step.started.map { stamp($0) } ?? ""
            let ended = step.ended.map { stamp($0) } ?? ""
            rows += """
                <tr data-step="\(Html.escape(step.id))"><td>\(Html.escape(step.id))</td>\
                <td><span class="state \(step.state.rawValue)">\(step.state.rawValue)</span></td>\
                <td>\(step.attempts)</td><td>\(Html.escape(step.owner ?? ""))</td><td>\(started)</td><td>\(ended)</td>\
                <td>\(step.value.map { "\($0.count) B" } ?? "")</td>\
                <td>\(Html.escape(step.after.joined(separator: ", ")))</td>\
                <td class="error">\(Html.escape(step.lastError ?? ""))</td></tr>

                """
        }
        let tags = record.tags.sorted().map(Html.escape).joined(separator: ", ")
        return """
            <h1 id="title">\(Html.escape(record.id)) <span class="state \(record.state.rawValue)" id="state">\
            \(record.state.rawValue)</span></h1>
            <p>workflow <b>\(Html.escape(record.workflow))</b> · created \(stamp(record.created)) · updated \
            \(stamp(record.updated))\(tags.isEmpty ? "" : " · tags \(tags)")\
            \(record.parent.map { " · child of <a href=\"/run?id=\(Html.escape(percent($0)))\">\(Html.escape($0))</a>" } ?? "")</p>
            \(record.error.map { "<p class=\"error\" id=\"run-error\">\(Html.escape($0))</p>" } ?? "")
            <p>\(canCancel ? "<button data-action=\"cancel\" id=\"cancel\">Cancel</button> " : "")\
            \(canRetry ? "<button data-action=\"retry\" id=\"retry\">Retry</button>" : "")</p><p id="message"></p>
            <section><h2>Graph</h2>\(picture.graph)<p class="live">thick: the critical path (the chain of steps \
            that took longest)</p></section>
            <section><h2>Timeline</h2>\(picture.timeline)</section>
            <section><h2>Steps</h2><table><thead><tr><th>step</th><th>state</th><th>attempts</th><th>owner</th>\
            <th>started</th><th>ended</th><th>value</th><th>after</th><th>error</th></tr></thead>
            <tbody id="steps">\(rows)</tbody></table></section>
            """
    }

    /// A run as the JSON API gives it.
    static func object(_ record: DurableRunRecord, steps: Bool) -> [String: Any] {
        var object: [String: Any] = [
            "id": record.id, "workflow": record.workflow, "state": record.state.rawValue,
            "created": record.created.timeIntervalSince1970, "updated": record.updated.timeIntervalSince1970,
            "steps": record.steps.count, "stepsCompleted": record.steps.filter { $0.state == .completed }.count,
            "tags": record.tags.sorted(),
        ]
        if let error = record.error { object["error"] = error }
        if steps {
            object["steps"] = record.steps.map { step -> [String: Any] in
                var entry: [String: Any] = [
                    "id": step.id, "state": step.state.rawValue, "attempts": step.attempts, "after": step.after,
                ]
                if let owner = step.owner { entry["owner"] = owner }
                if let error = step.lastError { entry["error"] = error }
                if let started = step.started { entry["started"] = started.timeIntervalSince1970 }
                if let ended = step.ended { entry["ended"] = ended.timeIntervalSince1970 }
                if let value = step.value { entry["valueBytes"] = value.count }
                return entry
            }
        }
        return object
    }

    static func stamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func percent(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// `text` as the inside of a JavaScript string literal in double quotes: every character outside
    /// plain ASCII letters and digits escaped as `\uXXXX` (so neither a quote nor `</script>` can end it).
    static func jsString(_ text: String) -> String {
        var escaped = ""
        for unit in text.utf16 {
            if (unit >= 0x30 && unit <= 0x39) || (unit >= 0x41 && unit <= 0x5A) || (unit >= 0x61 && unit <= 0x7A) {
                escaped.append(Character(Unicode.Scalar(unit)!))
            } else {
                escaped += String(format: "\\u%04x", unit)
            }
        }
        return escaped
    }
}
