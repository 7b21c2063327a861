package io.github.rrm.agent;

/**
 * The RocketMQ client's own version ({@code V4_9_8}, {@code V5_3_3}), as the application's client jar defines
 * it. Read reflectively: {@code MQVersion.CURRENT_VERSION} is a compile-time constant, so a direct reference
 * would be the version the agent was compiled against.
 */
final class ClientVersion {
    private static volatile String current;

    private ClientVersion() {
    }

    static String current() {
        String value = current;
        if (value == null) {
            value = read();
            current = value;
        }
        return value;
    }

    private static String read() {
        try {
            Class<?> mqVersion = Class.forName("org.apache.rocketmq.common.MQVersion", true,
                org.apache.rocketmq.client.hook.SendMessageHook.class.getClassLoader());
            int ordinal = mqVersion.getField("CURRENT_VERSION").getInt(null);
            return (String) mqVersion.getMethod("getVersionDesc", int.class).invoke(null, ordinal);
        } catch (Exception e) {
            return null;
        }
    }
}
