"""What a browser or mail client gets from an HTML page: its start tags with attributes, and its text."""

from __future__ import annotations

from html.parser import HTMLParser


class Page(HTMLParser):
    """Start tags with attributes, and the text shown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(html: str) -> Page:
    """`html` read by the parser."""
    page = Page()
    page.feed(html)
    return page
