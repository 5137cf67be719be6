// Caption views follow new text as it arrives, until the reader scrolls up to read back;
// scrolling back to the end (or the "Jump to latest" button) follows again. Shared by the
// main page and the viewer page.

/**
 * Makes `transcript` (a scrollable element) follow new text, with `jump` (a button, hidden
 * while following) to return to the end. Returns `follow()`: call it after adding text.
 */
export function followNewText(transcript, jump) {
  let stickToBottom = true;
  const follow = () => {
    if (stickToBottom) transcript.scrollTop = transcript.scrollHeight;
    jump.hidden = stickToBottom;
  };
  transcript.addEventListener('scroll', () => {
    const { scrollTop, scrollHeight, clientHeight } = transcript;
    stickToBottom = scrollHeight - scrollTop - clientHeight < 24;
    jump.hidden = stickToBottom;
  });
  jump.addEventListener('click', () => {
    stickToBottom = true;
    follow();
    transcript.focus();
  });
  return follow;
}
