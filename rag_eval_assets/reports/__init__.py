"""Run reports: charts (PNG), Markdown tables and a self-contained HTML page."""
