// What the member's role lets them do, as the session said at sign-in
// (GET /api/auth/session's `capabilities`; an admin's is ["*"]). Pages use it to leave
// out what could only be refused; the server still decides every request, so a role
// changed since sign-in is refused there, and the page says so.

/** Whether the session (ctx.session) holds `capability`. */
export function may(session, capability) {
  const capabilities = session?.capabilities || [];
  return capabilities.includes("*") || capabilities.includes(capability);
}
