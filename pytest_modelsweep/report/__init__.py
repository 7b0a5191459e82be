"""Reports: terminal summary, Markdown, pytest-html sections."""
