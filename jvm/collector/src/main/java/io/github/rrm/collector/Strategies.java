package io.github.rrm.collector;

import java.util.Map;

/**
 * A client's allocation strategy by the name its {@code getName()} returns, from the class name its running info
 * shows ({@code properties.allocateMessageQueueStrategy} is the object's default {@code toString}, class@hash).
 */
final class Strategies {
  private static final Map<String, String> NAME_BY_CLASS = Map.of(
      "AllocateMessageQueueAveragely", "AVG",
      "AllocateMessageQueueAveragelyByCircle", "AVG_BY_CIRCLE",
      "AllocateMessageQueueConsistentHash", "CONSISTENT_HASH",
      "AllocateMessageQueueByConfig", "CONFIG",
      "AllocateMessageQueueByMachineRoom", "MACHINE_ROOM",
      "AllocateMachineRoomNearby", "MACHINE_ROOM_NEARBY");

  private Strategies() {}

  /**
   * The strategy's name, or null when the property is absent. A strategy RocketMQ does not ship is named by its
   * simple class name (the monitor reports it as unsupported); {@code AllocateMachineRoomNearby} gives
   * {@code MACHINE_ROOM_NEARBY} without its inner strategy, which the running info does not show.
   */
  static String nameOf(String property) {
    if (property == null || property.isBlank()) {
      return null;
    }
    String className = property.trim();
    int at = className.indexOf('@');
    if (at >= 0) {
      className = className.substring(0, at);
    }
    String simple = className.substring(className.lastIndexOf('.') + 1);
    int inner = simple.lastIndexOf('$');
    if (inner >= 0) {
      simple = simple.substring(inner + 1);
    }
    return NAME_BY_CLASS.getOrDefault(simple, simple.isEmpty() ? null : simple);
  }
}
