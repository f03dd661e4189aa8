# The bmad wire protocol: every message between clients, the coordinator, worker replicas and
# the ranks of one replica. One Envelope per ZeroMQ frame (after the ROUTER routing id).
#
# Compatibility: fields are only ever added (never renumbered or retyped); a change that old
# peers cannot read bumps `protocolVersion`, and a peer refuses envelopes of another version.

@0xfa057440109460ee;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("bmad::wire");

const protocolVersion :UInt16 = 12;  # proto::kProtocolVersion (codec.cc checks they agree)

enum FinishReason {
  none @0;        # more chunks follow
  stop @1;        # EOS token, a stop token id or a stop string
  length @2;      # max_tokens or the context length was reached
  cancelled @3;   # the client cancelled
  error @4;       # the request failed; an Error message carries why
}

enum ResponseFormat {
  text @0;        # any text
  jsonObject @1;  # one JSON object (OpenAI's response_format "json_object")
  jsonSchema @2;  # one JSON value that SamplingParams.jsonSchema allows ("json_schema")
  regex @3;       # text that SamplingParams.regex matches whole (vLLM's guided_regex, guided_choice)
}

enum Pool {
  normal @0;
  longTail @1;
}

struct SamplingParams {
  temperature @0 :Float32 = 1.0;    # 0: greedy
  topK @1 :Int32 = 0;               # 0: off
  topP @2 :Float32 = 1.0;
  minP @3 :Float32 = 0.0;
  repetitionPenalty @4 :Float32 = 1.0;
  presencePenalty @5 :Float32 = 0.0;
  frequencyPenalty @6 :Float32 = 0.0;
  seed @7 :UInt64;
  hasSeed @8 :Bool;
  maxTokens @9 :UInt32 = 16;
  stopTokenIds @10 :List(UInt32);
  stopStrings @11 :List(Text);
  logprobs @12 :Bool;
  ignoreEos @13 :Bool;
  topLogprobs @14 :UInt32;          # alternatives per token (needs logprobs), at most 20
  minTokens @15 :UInt32;            # nothing ends the output before this many tokens
  logitBias @16 :List(LogitBias);   # OpenAI's logit_bias, distinct token ids
  includeStopStrInOutput @17 :Bool; # vLLM's: a stop string that ends the output is part of it
  responseFormat @18 :ResponseFormat; # what the output must be
  jsonSchema @19 :Text;               # with responseFormat jsonSchema: the JSON Schema, as JSON
  allowedTokenIds @20 :List(UInt32);  # vLLM's: when not empty, only these tokens are drawn
  badWords @21 :List(List(UInt32));   # vLLM's, as token sequences: none is generated whole
  regex @22 :Text;                    # with responseFormat regex: the pattern (sampling::RegexNfa)
  promptLogprobs @23 :Int32 = -1;     # the prompt's own log-probabilities, with this many
                                      # alternatives per position; -1: none
  cacheSalt @24 :Text;                # vLLM's cache_salt: prefix-cache blocks are shared only
                                      # among requests with the same salt (empty: none)
  disableAnyWhitespace @25 :Bool;     # vLLM's: a JSON response format's output has no
                                      # whitespace outside its strings
  reasoningEndToken @26 :Int32 = -1;  # >= 0: the response format applies after this token (a
                                      # reasoning block's end); before it, no end of output
  reasoningStartToken @27 :Int32 = -1; # >= 0, with reasoningEndToken: the block is not open yet;
                                      # the first token may be this one, which opens it
}

struct LogitBias {
  tokenId @0 :UInt32;
  bias @1 :Float32;                 # in [-100, 100]
}

struct Usage {
  promptTokens @0 :UInt32;
  completionTokens @1 :UInt32;
  cachedPromptTokens @2 :UInt32;
}

# ---- client <-> coordinator ----

struct Submit {
  clientRequestId @0 :Text;
  model @1 :Text;
  prompt :union {
    text @2 :Text;
    tokenIds @3 :List(UInt32);
  }
  sampling @4 :SamplingParams;
  priority @5 :Int32 = -1;    # class, 0 the most urgent; -1: the coordinator's default class
  sloMs @6 :UInt32;           # deadline for the whole request; 0: the server's default
  stream @7 :Bool = true;
  apiKey @8 :Text;            # one of coordinator.api_keys_file's keys, when it names a file
}

struct Cancel {
  clientRequestId @0 :Text;
  requestId @1 :UInt64;       # 0: use clientRequestId
}

struct Accepted {
  clientRequestId @0 :Text;
  requestId @1 :UInt64;
  promptTokens @2 :UInt32;
}

struct TokenChunk {
  requestId @0 :UInt64;
  clientRequestId @1 :Text;
  sequence @2 :UInt32;        # 0, 1, 2, ... per request and receiver
  tokenOffset @3 :UInt32;     # index in the generated output of this chunk's first token
  tokenIds @4 :List(UInt32);
  text @5 :Text;
  logprobs @6 :List(Float32); # one per token id when asked for
  finishReason @7 :FinishReason;
  usage @8 :Usage;            # on the last chunk
  topTokenIds @9 :List(UInt32);   # per token, its top-logprobs alternatives, most likely first
  topLogprobs @10 :List(Float32); # their log-probabilities, in the same order
  assignment @11 :UInt32;     # replica -> coordinator: the Assign.assignment this chunk answers
  stopString @12 :Text;       # a stop finish caused by a stop string: that string
  stopTokenId @13 :Int64 = -1;  # a stop finish caused by a stop_token_ids entry: that id
  # With promptLogprobs: the log-probabilities of prompt positions promptLogprobOffset onward
  # (position 0 has none), each given the tokens before it, with their ranks and alternatives
  # (promptLogprobs per position, most likely first). Chunks carry them in prompt order.
  promptLogprobOffset @14 :UInt32;
  promptLogprobs @15 :List(Float32);
  promptRanks @16 :List(UInt32);
  promptTopTokenIds @17 :List(UInt32);
  promptTopLogprobs @18 :List(Float32);
}

struct Error {
  code @0 :UInt16;            # bmad::StatusCode
  message @1 :Text;
  requestId @2 :UInt64;
  clientRequestId @3 :Text;
  retryAfterMs @4 :UInt32;    # for "overloaded"
  assignment @5 :UInt32;      # replica -> coordinator: the Assign.assignment it concerns
}

struct StatusQuery {
  unused @0 :Bool;
}

struct LoadStats {
  running @0 :UInt32;
  waiting @1 :UInt32;
  kvUsage @2 :Float32;        # 0..1 of KV blocks in use
  utilization @3 :Float32;    # 0..1 of recent wall time spent computing
  kvFreeBlocks @4 :UInt32;
  kvTotalBlocks @5 :UInt32;
  stepsTotal @6 :UInt64;
  generatedTokensTotal @7 :UInt64;
  maxSeqs @8 :UInt32;
}

struct ReplicaInfo {
  replicaId @0 :Text;
  pool @1 :Pool;
  tp @2 :UInt32;
  pp @3 :UInt32;
  kvBlocks @4 :UInt32;
  blockSize @5 :UInt32;
  maxSeqs @6 :UInt32;
  modelName @7 :Text;
  contextLength @8 :UInt32;
  metricsAddress @9 :Text;
  live @10 :Bool;
  load @11 :LoadStats;
  inFlight @12 :UInt32;       # requests the coordinator has assigned there
  routedTotal @13 :UInt64;
}

struct ClusterStatus {
  modelName @0 :Text;
  replicas @1 :List(ReplicaInfo);
  queued @2 :UInt32;
  inFlight @3 :UInt32;
  requestsTotal @4 :UInt64;
}

# ---- coordinator <-> worker replica (leader) ----

struct Register {
  info @0 :ReplicaInfo;       # live, load, inFlight and routedTotal are ignored
  incarnation @1 :UInt64;     # changes when the process restarts
}

struct RegisterAck {
  accepted @0 :Bool;
  message @1 :Text;
}

struct Heartbeat {
  replicaId @0 :Text;
  load @1 :LoadStats;
  activeRequestIds @2 :List(UInt64);
  # The newest Assign the replica has taken since it last registered (hasLastAssignment false
  # until it has taken one): a request assigned no later that is not among activeRequestIds was
  # lost on the way (its Assign, or its last chunk), and the coordinator assigns it again.
  lastAssignment @3 :UInt32;
  hasLastAssignment @4 :Bool;
  # The assignment each of activeRequestIds is served under, in the same order: an older copy
  # under the same id is not the request the coordinator assigned since.
  activeAssignments @5 :List(UInt32);
  # The newest number a HeartbeatAck carried since the replica last registered (hasSeenAssignment
  # false until one did): every Assign up to it was sent before that ack on the same connection,
  # so it has arrived unless it was lost, and an idle replica's lost Assign is found at once.
  seenAssignment @6 :UInt32;
  hasSeenAssignment @7 :Bool;
}

struct Assign {
  requestId @0 :UInt64;
  promptTokens @1 :List(UInt32);
  generatedTokens @2 :List(UInt32);  # already streamed to the client (migration): continue after
  sampling @3 :SamplingParams;
  priority @4 :Int32;
  sloMs @5 :UInt32;           # what is left of the request's deadline when this was sent (1:
                              # overdue); 0: the replica's default
  arrivalUnixMs @6 :UInt64;
  assignment @7 :UInt32;      # a new number for every Assign the coordinator sends
}

struct WorkerCancel {
  requestId @0 :UInt64;
}

struct Drain {
  unused @0 :Bool;
}

# The coordinator's answer to each heartbeat of a replica it knows: a replica that hears
# nothing for the liveness timeout reports itself not ready.
struct HeartbeatAck {
  unused @0 :Bool;
  # The newest Assign number sent to this replica before this ack (hasLastAssignment false when
  # none since it registered); the replica echoes it as Heartbeat.seenAssignment.
  lastAssignment @1 :UInt32;
  hasLastAssignment @2 :Bool;
}

struct Shutdown {
  reason @0 :Text;
  # Stopped on purpose (told to stop, drained, its run time over), not failed: the coordinator
  # drops its per-replica series rather than reporting it down until it comes back.
  planned @1 :Bool;
}

# ---- replica leader -> its ranks: the step plan, as a delta ----

struct NewSequence {
  seqId @0 :UInt64;
  tokens @1 :List(UInt32);    # every token known when the sequence starts (prompt + resumed)
}

struct ScheduledSequence {
  seqId @0 :UInt64;
  position @1 :UInt32;        # position of the first token computed this step
  numTokens @2 :UInt32;       # tokens computed this step
  appendTokens @3 :List(UInt32);  # tokens sampled since the last plan, appended before computing
  newBlockIds @4 :List(UInt32);   # appended to the sequence's block table
  wantLogits @5 :Bool;        # the last token's logits are sampled this step
}

struct StepPlan {
  step @0 :UInt64;
  newSequences @1 :List(NewSequence);
  scheduled @2 :List(ScheduledSequence);
  released @3 :List(UInt64);  # finished, cancelled or preempted: forget these
  shutdown @4 :Bool;
}

struct Envelope {
  version @0 :UInt16;
  body :union {
    submit @1 :Submit;
    cancel @2 :Cancel;
    accepted @3 :Accepted;
    tokenChunk @4 :TokenChunk;
    error @5 :Error;
    statusQuery @6 :StatusQuery;
    clusterStatus @7 :ClusterStatus;
    register @8 :Register;
    registerAck @9 :RegisterAck;
    heartbeat @10 :Heartbeat;
    assign @11 :Assign;
    workerCancel @12 :WorkerCancel;
    drain @13 :Drain;
    shutdown @14 :Shutdown;
    stepPlan @15 :StepPlan;
    heartbeatAck @16 :HeartbeatAck;
  }
}
