"""The look: a Gradio theme with local fonts (the page must work offline) and the CSS for our HTML."""

from __future__ import annotations

import gradio as gr

FONTS = ["Inter", "ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "sans-serif"]
MONO = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="indigo", secondary_hue="orange", neutral_hue="slate", font=FONTS,
                          font_mono=MONO, radius_size="md")


CSS = """
.gradio-container { max-width: 1560px !important; margin: 0 auto !important; }
#title h1 { font-size: 26px; margin: 0; }
#title p { margin: 4px 0 0; color: var(--body-text-color-subdued); }
.hostline { font-size: 13px; color: var(--body-text-color-subdued); }
.notice p { font-size: 13px !important; margin: 2px 0 !important; }
.side-card { border-radius: 12px !important; }
.side-title { font-weight: 700; font-size: 15px; display: flex; align-items: center; gap: 8px; }
.side-note p { font-size: 12.5px !important; margin: 0 !important; }
.side { display: inline-flex; align-items: center; justify-content: center; min-width: 22px; height: 22px;
        border-radius: 6px; color: #fff; font-weight: 700; font-size: 13px; padding: 0 4px; }
.side-A { background: #4f46e5; } .side-B { background: #f97316; }
.compare-title p { margin: 0 !important; }
.compare-row { flex-wrap: wrap !important; gap: 8px !important; }
.compare-row button { font-size: 13px !important; flex: 1 1 auto !important; min-width: fit-content !important;
                      white-space: nowrap; }
.secondary-wrap input { text-overflow: ellipsis; }  /* a long choice ends in "…" instead of under the arrow */
#run-status p { margin: 0; font-size: 14px; }

.pane { border: 1px solid var(--border-color-primary); border-radius: 12px; padding: 12px 14px;
        background: var(--block-background-fill); height: 330px; display: flex; flex-direction: column; gap: 6px; }
.pane-head { display: flex; align-items: center; gap: 8px; font-weight: 600; min-width: 0; }
.pane-head .cfg { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.badge { margin-left: auto; flex-shrink: 0; font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 999px;
         background: #e0e7ff; color: #3730a3; max-width: 60%; white-space: nowrap; overflow: hidden;
         text-overflow: ellipsis; }
.state-ok .badge { background: #dcfce7; color: #166534; }
.state-invalid .badge, .state-error .badge { background: #fee2e2; color: #991b1b; }
.state-stopped .badge, .state-skipped .badge { background: #fef3c7; color: #92400e; }
.state-waiting .badge { background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
.pane-stats { font-size: 13.5px; font-variant-numeric: tabular-nums; }
.tokens { flex: 1; min-height: 0; overflow-y: auto; display: flex; flex-direction: column-reverse;
          background: var(--background-fill-secondary); border-radius: 8px; padding: 8px 10px; }
.tokens > div { margin-bottom: auto !important; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, SFMono-Regular, Menlo,
                Consolas, monospace; font-size: 13.5px; line-height: 1.6; }
.tk { border-radius: 3px; }
.tk0 { background: rgba(79, 70, 229, 0.13); }
.tk1 { background: rgba(249, 115, 22, 0.16); }
.tk-draft { text-decoration: underline 2px rgba(22, 163, 74, 0.8); text-underline-offset: 3px; }
.tk-diff { background: none; padding: 0; outline: 2px solid #e11d48; border-radius: 3px; cursor: help; }
.tk-diff::before { content: "≠"; color: #fff; background: #e11d48; font-weight: 700; font-size: 11px;
                   padding: 0 3px; margin-right: 2px; border-radius: 3px 0 0 3px; }
.note { font-size: 13px; padding: 6px 10px; border-radius: 8px; margin-top: 6px; }
.note.warn { background: #fef3c7; color: #92400e; }
.note.bad { background: #fee2e2; color: #991b1b; }
.note.good { background: #dcfce7; color: #166534; }
.dim { color: var(--body-text-color-subdued); font-weight: 400; }
.good { color: #15803d; } .bad { color: #b91c1c; }

.summary .headline { display: flex; gap: 28px; font-size: 22px; font-weight: 700; }
.summary .headline .aside { font-size: 16px; }
.summary .headline .label { font-size: 13px; font-weight: 400; color: var(--body-text-color-subdued); }
table.metrics, table.checks { width: 100% !important; border-collapse: collapse; font-size: 13.5px;
                              font-variant-numeric: tabular-nums; border: none !important; }
table.metrics th, table.metrics td, table.checks th, table.checks td {
    padding: 6px 10px !important; border: none !important; border-bottom: 1px solid var(--border-color-primary) !important;
    text-align: left; vertical-align: top; }
table.metrics td:last-child { white-space: nowrap; }
table.metrics thead, table.metrics tbody, table.metrics tr { border: none !important; }
.summary { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 24px; }
.summary .note { margin-top: 0; }
#run-ab { background: #4f46e5 !important; color: #fff !important; }
#run-ab:hover { background: #4338ca !important; }
#stop { color: #b91c1c !important; border-color: #fca5a5 !important; }
table.metrics thead th { font-size: 13px; background: var(--background-fill-secondary); }
table.metrics tbody th, table.checks th { font-weight: 600; white-space: nowrap; }
table.metrics code { font-size: 12px; overflow-wrap: anywhere; }
.diags { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 16px; }
.diag h4 { margin: 0 0 6px; display: flex; gap: 8px; align-items: center; }
.checks .mark-ok td:first-child { color: #15803d; font-weight: 700; }
.checks .mark-bad td:first-child { color: #b91c1c; font-weight: 700; }
.checks .mark-na td:first-child { color: var(--body-text-color-subdued); }
.env { display: grid; grid-template-columns: repeat(auto-fit, minmax(160px, 1fr)); gap: 10px; margin-top: 14px;
       font-size: 13px; padding: 10px; background: var(--background-fill-secondary); border-radius: 10px; }
.env b { overflow-wrap: anywhere; }
"""
