"""HTTP/1.1 plumbing for the test servers, cheaper per request than http.server's own: request
headers read without the email package (a third of a small request's cost there), the Date header
formatted once a second, a response's headers and body sent in one write. Anything unusual (not
HTTP/1.1, a path starting with //) goes through http.server's parser as before."""
from __future__ import annotations

import email.utils
import http.client
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler


class Headers(dict):
    """Request headers by lower-cased name; get() as email.message's: the first of repeated
    headers, the value without its leading blanks and line end."""

    def get(self, name: str, default=None):     # type: ignore[override]
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str):
        return dict.get(self, name.lower())


def parse_headers(lines: list[bytes]) -> Headers:
    headers = Headers()
    for line in lines:
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if colon:
            headers.setdefault(name.lower(), value.lstrip(" \t").rstrip("\r\n"))
    return headers


_date = (0, "")


def http_date() -> str:
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, email.utils.formatdate(now, usegmt=True))
    return _date[1]


class FastRequests(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def parse_request(self) -> bool:
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")     # type: ignore[attr-defined]
        words = line.split()
        if len(words) != 3 or words[2] != "HTTP/1.1" or words[1].startswith("//"):
            return super().parse_request()
        self.requestline, self.request_version = line, words[2]
        self.command, self.path = words[0], words[1]
        self.close_connection = False
        try:
            self.headers = parse_headers(http.client._read_headers(self.rfile))     # type: ignore
        except http.client.LineTooLong as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long", str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers", str(err))
            return False
        if self.headers.get("Connection", "").lower() == "close":
            self.close_connection = True
        if self.headers.get("Expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def date_time_string(self, timestamp=None) -> str:
        return http_date() if timestamp is None else super().date_time_string(timestamp)

    def send_whole(self, code: int, data: bytes, headers: dict) -> None:
        """A response with a body: status line, headers and body in one write."""
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        if self.request_version == "HTTP/0.9":
            self.wfile.write(data)
            return
        self._headers_buffer.extend((b"\r\n", data))    # type: ignore[attr-defined]
        self.flush_headers()
