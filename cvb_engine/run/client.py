"""HTTP to the endpoint: one chat completion, retries with backoff, the model catalog.

Every reply is read and validated by :mod:`cvb_engine.replies`; whatever an
endpoint sends becomes an ok or an error :class:`~cvb_engine.run.recording.Finished`,
never an exception (only a refused key stops the run).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from typing import Any

import httpx2
import openai

from cvb_engine.cells import Finished
from cvb_engine.endpoints import Endpoint, scrub
from cvb_engine.kinds import RecordStatus
from cvb_engine.prompts import Message
from cvb_engine.replies import (
    MAX_ERROR_CHARS,
    MAX_RESPONSE_CHARS,
    BadReply,
    BoundedClient,
    Reply,
    body_limit,
    is_cut,
    parse_catalog,
    parse_completion,
)
from cvb_engine.run.errors import FatalEndpointError, RunError


def _retry_after(exc: openai.APIStatusError, cap: float) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), cap)
    except ValueError:
        return None


async def call_once(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    secret: str = "",
    max_chars: int = MAX_RESPONSE_CHARS,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
) -> Reply:
    """One chat completion, read and validated by :func:`cvb_engine.replies.parse_completion`.

    The reply's separate reasoning field (``reasoning_content`` or ``reasoning``)
    is kept apart from the content and never scored. A reply whose content is
    empty but whose reasoning is not (a reasoning model cut off by
    ``max_tokens``) is an answer with no code, not an API failure.

    Raises:
        BadReply: the reply is not usable (not JSON, no choices, content that
            is not text, no content and no reasoning).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if seed is not None:
        body["seed"] = seed
    if tools:
        body["tools"] = tools
        body["tool_choice"] = tool_choice or "auto"
    # Posted as built, and the raw response returned: the body is parsed here, not by the
    # client's unvalidated models. (``chat.completions.create`` would first walk these
    # plain JSON messages against its typed parameters, which changes nothing in them and
    # cost a quarter of a bare loop's CPU per request; ``post`` is the client's documented
    # way to send a request as is, with the same headers, timeouts and errors.)
    http = await client.post("/chat/completions", body=body, cast_to=httpx2.Response)
    return parse_completion(
        http.content, secret=secret, max_chars=max_chars, body_cut=is_cut(http), tools=bool(tools)
    )


async def call_with_retries(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[Message],
    *,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    max_attempts: int,
    retry_after_cap_s: float,
    secret: str,
    max_chars: int = MAX_RESPONSE_CHARS,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
) -> Finished:
    """Call until success or ``max_attempts``; a failure becomes an error result.

    Never raises for what an endpoint sends (only :class:`FatalEndpointError`
    for a refused key, and cancellation): anything else, even an exception
    nobody foresaw, is retried and then becomes the error record.
    """
    error = "not attempted"
    started = time.monotonic()
    for attempt in range(1, max_attempts + 1):
        wait: float | None = None
        t0 = time.monotonic()
        try:
            reply = await call_once(
                client,
                model,
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                secret=secret,
                max_chars=max_chars,
                tools=tools,
                tool_choice=tool_choice,
            )
            return Finished(
                cell=("", "", "", 0),
                status=RecordStatus.OK,
                response=reply.content,
                error=None,
                latency_s=round(time.monotonic() - t0, 4),
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                finish_reason=reply.finish_reason,
                attempts=attempt,
                messages_sha256="",
                reasoning=reply.reasoning,
                response_cut=reply.cut,
                tool_calls=reply.tool_calls,
            )
        except openai.AuthenticationError as exc:
            raise FatalEndpointError(
                server_text(
                    f"the endpoint refused the API key (HTTP {exc.status_code}): {exc.message}",
                    secret,
                )
            ) from None
        except openai.PermissionDeniedError as exc:
            raise FatalEndpointError(
                server_text(f"the endpoint refused access (HTTP 403): {exc.message}", secret)
            ) from None
        except openai.RateLimitError as exc:
            error = f"HTTP 429 rate limited: {exc.message}"
            wait = _retry_after(exc, retry_after_cap_s)
        except openai.APIStatusError as exc:
            error = f"HTTP {exc.status_code}: {exc.message}"
            if exc.status_code < 500 and exc.status_code not in (408, 409):
                break  # the request itself is wrong (400, 404, 422): retrying cannot help
        except openai.APITimeoutError:
            error = "request timed out"
        except openai.APIConnectionError as exc:
            error = f"connection failed: {exc.__cause__ or exc}"
        except BadReply as exc:
            error = str(exc)
        except (httpx2.HTTPError, openai.OpenAIError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            # Nothing a server sends may end the run: whatever reading
            # a reply raised that nobody foresaw is this cell's error.
            error = f"unusable reply ({type(exc).__name__}): {exc}"
        if attempt < max_attempts:
            if wait is None:
                wait = min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
            await asyncio.sleep(wait)
    return Finished(
        cell=("", "", "", 0),
        status=RecordStatus.ERROR,
        response=None,
        error=server_text(error, secret)
        + f" (after {attempt} attempt{'s' if attempt > 1 else ''}, "
        f"{time.monotonic() - started:.1f}s)",
        latency_s=None,
        prompt_tokens=None,
        completion_tokens=None,
        finish_reason=None,
        attempts=attempt,
        messages_sha256="",
        error_kind="api",
    )


def server_text(text: object, secret: str) -> str:
    """An error message built from server text: scrubbed, and cut to a sane length."""
    return scrub(str(text), secret)[:MAX_ERROR_CHARS]


def make_client(
    endpoint: Endpoint,
    key: str,
    timeout_s: float,
    concurrency: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    max_response_chars: int = MAX_RESPONSE_CHARS,
) -> openai.AsyncOpenAI:
    """An ``openai`` client for ``concurrency`` requests at a time.

    Its HTTP client keeps at most ``body_limit(max_response_chars)`` bytes of
    any response body (:class:`cvb_engine.replies.BoundedClient`).

    Building an SSL context costs about 0.1 s (it loads the CA bundle): pass one
    (from ``httpx2.create_ssl_context()``) to clients made by the dozen.
    """
    limits = httpx2.Limits(
        max_connections=max(concurrency, 1) + 4, max_keepalive_connections=max(concurrency, 1) + 4
    )
    http_client = BoundedClient(
        max_body_bytes=body_limit(max_response_chars),
        limits=limits,
        timeout=timeout_s,
        verify=ssl_context if ssl_context is not None else True,
    )
    return openai.AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=key,
        max_retries=0,  # retries are ours: backoff, Retry-After cap, error records
        timeout=timeout_s,
        http_client=http_client,
    )


async def probe_catalog(
    endpoint: Endpoint,
    key: str,
    timeout_s: float = 20.0,
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> list[str]:
    """Model ids from ``GET /models``; a clear :class:`RunError` when that fails."""
    client = make_client(endpoint, key, timeout_s, 1, ssl_context=ssl_context)
    try:
        raw = await client.models.with_raw_response.list()
        return parse_catalog(raw.http_response.content, secret=key)
    except openai.AuthenticationError:
        raise RunError(
            f"{endpoint.base_url} refused the key in ${endpoint.api_key_env} (HTTP 401)"
        ) from None
    except openai.APIConnectionError:
        raise RunError(f"cannot reach {endpoint.base_url} (connection failed)") from None
    except openai.APIStatusError as exc:
        raise RunError(
            f"{endpoint.base_url}/models answered HTTP {exc.status_code}: "
            + server_text(exc.message, key)
        ) from None
    except Exception as exc:  # whatever the body was, it is not a catalog
        raise RunError(
            f"{endpoint.base_url}/models gave an unusable answer: {server_text(exc, key)}"
        ) from None
    finally:
        await client.close()


__all__ = ["call_once", "call_with_retries", "make_client", "probe_catalog", "server_text"]
