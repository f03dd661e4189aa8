#include "common/proto/frames.h"

#include <gtest/gtest.h>

namespace bmad::proto {
namespace {

class FramesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::linger, 0);
    router_.set(zmq::sockopt::rcvtimeo, 2000);
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::rcvtimeo, 2000);
    dealer_.set(zmq::sockopt::routing_id, "client-7");
    dealer_.connect(endpoint_);
  }
  zmq::context_t ctx_;
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  zmq::socket_t dealer_{ctx_, zmq::socket_type::dealer};
  std::string endpoint_;
};

TEST_F(FramesTest, DealerToRouterAndBack) {
  ASSERT_TRUE(SendMessage(dealer_, Cancel{"c", 5}).ok());
  auto in = ReceiveMessage(router_, /*routed=*/true);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->routing_id, "client-7");
  ASSERT_TRUE(in->message.ok()) << in->message.status().ToString();
  EXPECT_TRUE(std::holds_alternative<Cancel>(*in->message));

  ASSERT_TRUE(SendMessage(router_, Accepted{"c", 5, 3}, in->routing_id).ok());
  auto reply = ReceiveMessage(dealer_, /*routed=*/false);
  ASSERT_TRUE(reply.has_value());
  ASSERT_TRUE(reply->message.ok());
  EXPECT_EQ(std::get<Accepted>(*reply->message).prompt_tokens, 3u);
}

TEST_F(FramesTest, GarbageAndExtraFramesAreErrorsWithTheSender) {
  dealer_.send(zmq::buffer(std::string("hello, not capnp")), zmq::send_flags::none);
  auto in = ReceiveMessage(router_, true);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->routing_id, "client-7");
  EXPECT_FALSE(in->message.ok());

  dealer_.send(zmq::buffer(std::string("a")), zmq::send_flags::sndmore);
  dealer_.send(zmq::buffer(std::string("b")), zmq::send_flags::none);
  in = ReceiveMessage(router_, true);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->message.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(in->message.status().message().find("got 2"), std::string::npos);
}

TEST_F(FramesTest, SizeLimitApplies) {
  Submit big;
  big.prompt_text = std::string(100000, 'x');
  ASSERT_TRUE(SendMessage(dealer_, big).ok());
  auto in = ReceiveMessage(router_, true, /*max_bytes=*/4096);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->message.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(FramesTest, AManyPartMessageIsCountedAndRefused) {
  for (int i = 0; i < 9999; ++i) dealer_.send(zmq::buffer(std::string("x")), zmq::send_flags::sndmore);
  dealer_.send(zmq::buffer(std::string("x")), zmq::send_flags::none);
  auto in = ReceiveMessage(router_, true);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->routing_id, "client-7");
  EXPECT_NE(in->message.status().message().find("got 10000"), std::string::npos) << in->message.status().ToString();
  // The next message starts cleanly after it.
  ASSERT_TRUE(SendMessage(dealer_, Cancel{"c", 5}).ok());
  in = ReceiveMessage(router_, true);
  ASSERT_TRUE(in.has_value());
  EXPECT_TRUE(in->message.ok()) << in->message.status().ToString();
}

TEST(FramesLimitTest, FramesFarOverTheLimitAreDroppedUnreadAndTheSocketGoesOn) {
  // The limit applies to connections made after it is set: set before bind, as the coordinator does.
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::rcvtimeo, 2000);
  LimitInboundMessageSize(router, 4096);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  auto connect = [&](const std::string& id) {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::routing_id, id);
    dealer.connect(endpoint);
    return dealer;
  };
  zmq::socket_t dealer = connect("client-7");
  // Up to twice the limit: read, and refused with the limit named.
  Submit over;
  over.prompt_text = std::string(6000, 'x');
  ASSERT_TRUE(SendMessage(dealer, over).ok());
  auto in = ReceiveMessage(router, true, 4096);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->message.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(in->message.status().message().find("4096"), std::string::npos) << in->message.status().ToString();
  // Far over: the transport drops it (and the connection); nothing reaches us.
  Submit huge;
  huge.prompt_text = std::string(1 << 20, 'x');
  ASSERT_TRUE(SendMessage(dealer, huge).ok());
  router.set(zmq::sockopt::rcvtimeo, 500);
  EXPECT_FALSE(ReceiveMessage(router, true, 4096).has_value());
  // Another peer is served as before.
  zmq::socket_t other = connect("client-8");
  ASSERT_TRUE(SendMessage(other, Cancel{"c", 6}).ok());
  router.set(zmq::sockopt::rcvtimeo, 2000);
  in = ReceiveMessage(router, true, 4096);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->routing_id, "client-8");
  EXPECT_TRUE(in->message.ok()) << in->message.status().ToString();
}

TEST_F(FramesTest, NothingReadyIsNullopt) {
  router_.set(zmq::sockopt::rcvtimeo, 10);
  EXPECT_FALSE(ReceiveMessage(router_, true).has_value());
}

TEST_F(FramesTest, UnknownPeerIsUnavailable) {
  Status s = SendMessage(router_, Drain{}, "nobody");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace bmad::proto
