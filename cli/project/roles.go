package project

// rolesHelp says what each project role may do, as controld checks it
// (controld/project.AccessFor and the endpoints' access levels;
// controld TestProjectRolesAsDocumented keeps them in step).
const rolesHelp = `

What each role may do in the project:
  viewer  see it: its allocations (list, get, top), members, balance, ledger,
          usage and budgets
  member  what a viewer may, and create and release any of its allocations,
          connect to them (ssh), and top up its balance
  owner   what a member may, and add members or change their roles, set its
          idle policy (project set) and its budgets (billing budget set|clear)
Platform admins may do through the API what an owner may in every project
(a shell on an allocation still needs owner or member, or to be its creator);
operators may see every project.`
