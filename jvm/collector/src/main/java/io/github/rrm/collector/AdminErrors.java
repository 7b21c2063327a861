package io.github.rrm.collector;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;
import org.apache.rocketmq.remoting.exception.RemotingSendRequestException;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

/** How a failed admin call is classified (peer unreachable, refused by access control) and told in a log line. */
final class AdminErrors {
  private AdminErrors() {}

  /** A connect, send or timeout error anywhere in the cause chain: the peer is considered down for the cycle. */
  static boolean isUnreachable(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RemotingConnectException || t instanceof RemotingTimeoutException
          || t instanceof RemotingSendRequestException) {
        return true;
      }
    }
    return false;
  }

  static boolean isAclDenied(Throwable e) {
    int code = e instanceof MQBrokerException b ? b.getResponseCode()
        : e instanceof MQClientException c ? c.getResponseCode() : -1;
    String text = String.valueOf(e.getMessage()).toLowerCase();
    // 5.x answers NO_PERMISSION; a 4.9.x broker (ACL 1) answers SYSTEM_ERROR with its AclException's text.
    return code == ResponseCode.NO_PERMISSION || text.contains("no permission") || text.contains("access denied")
        || text.contains("aclexception");
  }

  /** The end of a log line for a failed call: a refusal by access control says so, and what to check. */
  static String failed(Throwable e) {
    return isAclDenied(e)
        ? " refused by access control (check the collector's access_key and secret_key and the account's "
            + "permissions): " + brief(e)
        : " failed: " + brief(e);
  }

  static String brief(Throwable e) {
    String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    message = message.split("\n")[0];
    return e.getClass().getSimpleName() + ": " + (message.length() > 300 ? message.substring(0, 300) : message);
  }
}
