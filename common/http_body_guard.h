// A bound on every request body an httplib server reads. cpp-httplib 0.11 reads a request's
// whole body into memory before it routes the request, whatever its method and path, and its
// payload_max_length bounds only a declared Content-Length: a chunked body, a compressed one
// (it inflates Content-Encoding gzip, deflate and br), or a POST with neither length nor
// chunking (read until the client closes) could grow until the process ran out of memory,
// before any handler or API key check ran. And a body it does not read (a GET's) or cannot
// skip is parsed as the next request on the connection.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace httplib {
class Server;
class Request;
class Response;
class ContentReader;
}  // namespace httplib

namespace bmad::http_body {

struct BodyPolicy {
  size_t max_bytes = 0;  // once unchunked and decoded
  // Routes that read their body through ReadCapped (registered with a ContentReader).
  std::function<bool(const httplib::Request&)> capped_route;
  // Writes a refusal: the API's JSON error object, or a plain text line.
  std::function<void(httplib::Response&, int http_status, const std::string& message)> write_error;
  // What httplib's post-routing handler adds to every answer (CORS headers): an answer written
  // straight to the socket (see Guard) gets it here instead. May be empty.
  std::function<void(const httplib::Request&, httplib::Response&)> finish_answer;
};

// Bounds what `server` reads, before any handler runs (and before httplib answers an Expect:
// 100-continue):
//   - a declared length over max_bytes: 413, after httplib has read and dropped the body when it
//     is at most 4 times the limit (a client that sends its body before reading the answer then
//     gets it, not a reset); unread when longer, or when the client waits for 100 Continue;
//   - two Content-Length headers, or one and a Transfer-Encoding: 400 (two framings: a proxy in
//     front may have read the other one); a length that is not digits: 400; a Transfer-Encoding
//     other than chunked: 501;
//   - a POST, PUT or PATCH with neither length nor chunking has no body (HTTP/1.1); httplib,
//     which would read one until the client closed, is told its length is 0;
//   - a body on a method httplib does not read one for (GET, HEAD, OPTIONS): 400;
//   - outside the capped routes, a chunked body (411) or an encoded one (415); on them, a
//     multipart body (415: httplib would parse it with no handler for its parts) or an encoding
//     httplib does not decode (415).
// A refused body that cannot be skipped is left unread: the refusal is written straight to the
// socket and the connection closed under httplib (HttpConnection::AnswerAndClose). Takes the
// server's pre-routing and Expect handlers and sets its payload limit; call before it listens.
void Guard(httplib::Server& server, BodyPolicy policy);

// The body of a capped route: at most policy.max_bytes once decoded. Otherwise nullopt, with
// the refusal written (413 past the limit, 400 when the chunking or encoding is broken) and,
// where some of the body is left unread, the connection closed after the answer.
std::optional<std::string> ReadCapped(const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader, const BodyPolicy& policy);

}  // namespace bmad::http_body
