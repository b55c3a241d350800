/// The longest command name, in bytes, a plugin may declare and a client may send: a longer
/// one can have no handler, and would only be journaled and echoed back whole.
package let longestCommandName = 255
